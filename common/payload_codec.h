// The float payloads of the exchange and the forms they travel in (docs/protocol.md "Payloads"):
// PUSH/PUSH_PULL gradients and PARAMS parameters go as f32 frames, as bf16 frames
// (--wire-precision bf16, wire::kFlagBf16) or, for dense slices between a worker and the psd
// shards on its host, through a shared-memory segment (wire::kFlagShm, common/shm_segment.h).
// Both ends turn floats into frames and frames into floats only through these functions (PsClient
// in common/ps_client_payload.cpp, psd in psd/parameter_server_payload.cpp); the MAC of --auth
// mac is computed afterwards over the frames as sent. Pure functions, thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <zmq.hpp>

namespace psrun {

enum class PayloadForm : std::uint8_t { kF32 = 0, kBf16 = 1, kShm = 2 };
std::string_view to_string(PayloadForm form);

// The form a message's header announces: SHM, else BF16, else f32.
PayloadForm payload_form(std::uint32_t header_flags);
// The header flag of a form (0 for f32).
std::uint32_t payload_flag(PayloadForm form);
// Bytes per value in a payload frame: 4 (f32) or 2 (bf16). REQUIRES form != kShm.
std::size_t value_bytes(PayloadForm form);

// A payload frame holding `values` in `form` (f32 or bf16). f32 is sent zero-copy from `values`;
// bf16 is rounded (to nearest even) into `staging` (values.size() entries) and sent zero-copy
// from there. The memory sent from must stay unchanged until `holds` is back to its value before.
zmq::message_t encode_frame(std::span<const float> values, PayloadForm form, std::uint16_t* staging,
                            std::atomic<int>& holds);

// A bf16 payload frame of values already rounded (psd's cached copy of its parameters), sent
// zero-copy under the same rule.
zmq::message_t encode_staged_bf16(std::span<const std::uint16_t> values, std::atomic<int>& holds);

// The `count` floats of a received payload frame in `form` (f32 or bf16). REQUIRES
// frame.size() == count * value_bytes(form) (callers check it and name the frame). An aligned f32
// frame is used in place; a misaligned one (ZeroMQ guarantees no alignment) is copied, and a
// bf16 one expanded, into `spare` (room for count floats). The span lives as long as the frame
// or `spare`.
std::span<const float> decode_frame(const zmq::message_t& frame, std::size_t count, PayloadForm form, float* spare);

}  // namespace psrun
