// The "raw ZeroMQ" reference for `psrun bench ps --baseline`: the same exchange (one frame per
// tensor, zero-copy both ways, gradients out and parameters back) between a DEALER and a bare
// ROUTER echo server in a forked child, with no protocol, validation or optimizer.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/result.h"

namespace psrun::launcher::ps_tools {

// Round-trip times in ms (after `warmup` untimed ones). Call before any ZeroMQ context or thread
// exists in this process (it forks).
[[nodiscard]] Result<std::vector<double>> raw_zmq_roundtrips(const std::string& endpoint,
                                                             const std::vector<std::size_t>& frame_floats, int warmup,
                                                             int rounds);

}  // namespace psrun::launcher::ps_tools
