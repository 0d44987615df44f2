// psd's side of the reduced-precision exchange (--wire-precision bf16, wire::kFlagBf16,
// docs/wire-precision.md). psd keeps f32 master weights and optimizer state; only the payload
// frames are bf16. This class owns the two conversions:
// - gradients: bf16 slice frames are expanded to f32 by ParameterServer::decode_slices()
//   (psd/parameter_server_payload.cpp), so that the finite check, the optimizer and the sync
//   aggregator see f32 spans as with an f32 push; this class owns only the other direction:
// - parameters: the bf16 copy of the shard's current parameters (round to nearest even) that a
//   bf16 PARAMS reply sends zero-copy. It is converted once per ShardState::version(), so that
//   several replies of the same version (sync mode: every worker of a step; PULLs) share it.
//   Like ShardState's f32 buffers it is multi-buffered: a conversion never writes a buffer that
//   ZeroMQ still holds.
// Owned and used by the server's poll-loop thread only (a ThreadTeam may split a conversion).
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include <zmq.hpp>

#include "common/result.h"
#include "common/thread_team.h"
#include "common/wire.h"
#include "common/wire_precision.h"
#include "psd/shard_state.h"

namespace psrun::psd {

struct Bf16Buffer {
    std::vector<std::uint16_t> data;  // the shard's floats in bf16, at ShardState local offsets
    std::uint64_t version = std::numeric_limits<std::uint64_t>::max();  // ShardState::version() held
    std::atomic<int> holds{0};                                          // ZeroMQ messages still pointing into data
};

class Bf16Params {
  public:
    // The bf16 copy of the shard's current parameters; pair its data with zero_copy_message(..,
    // holds). Valid until the next call.
    Bf16Buffer& params(const ShardState& shard, ThreadTeam* team);

    std::uint64_t conversions() const { return conversions_; }  // parameter conversions done
    std::uint64_t reuses() const { return reuses_; }            // replies served from a cached copy

  private:
    std::vector<std::unique_ptr<Bf16Buffer>> buffers_;
    std::uint64_t conversions_ = 0, reuses_ = 0;
};

}  // namespace psrun::psd
