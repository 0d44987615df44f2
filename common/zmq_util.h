// ZeroMQ helpers shared by psd and its clients: endpoint normalisation, CURVE setup and
// zero-copy message construction.
#pragma once

#include <atomic>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/job_keys.h"
#include "common/result.h"

namespace psrun {

// "HOST:PORT" -> "tcp://HOST:PORT"; tcp:// and ipc:// pass through; anything else is an error.
[[nodiscard]] Result<std::string> normalize_endpoint(std::string_view endpoint);

// Splits a --ps list ("EP0,EP1,...") into its endpoints, skipping empty items.
std::vector<std::string> split_endpoint_list(const std::string& list);
// For bind(): resolves a tcp hostname to an IPv4 address ("*" and numeric hosts pass through)
// and checks that an ipc path's directory exists.
[[nodiscard]] Result<std::string> bindable_endpoint(std::string_view endpoint);

// Whether a socket on `endpoint` uses CURVE when the job has keys: tcp only. An ipc socket is
// protected by the kernel instead (psd makes the socket file 0600, so only the job's user can
// connect), because CURVE encryption costs ~80 ms per 26 MB round trip on this hardware
// (docs/benchmarks.md); the job token is checked on every message either way.
bool uses_curve(std::string_view endpoint);

// CURVE: the psd side (secret server key, ZAP domain "psrun") and the client side.
void make_curve_server(zmq::socket_t& socket, const JobKeys& keys);
void make_curve_client(zmq::socket_t& socket, const JobKeys& keys);
inline constexpr const char* kZapDomain = "psrun";

// A message whose payload is `bytes`, not copied. `holds` is incremented now and decremented
// (release order) when ZeroMQ frees the message, so the owner knows when it may write the
// buffer again. The buffer must stay alive and unmodified until then.
zmq::message_t zero_copy_message(const void* bytes, std::size_t size, std::atomic<int>& holds);

// Waits (yielding) until `holds` drops to zero. ZeroMQ releases sent messages from its I/O
// thread shortly after they are written.
void wait_released(const std::atomic<int>& holds);

inline std::string_view view(const zmq::message_t& m) { return {static_cast<const char*>(m.data()), m.size()}; }

}  // namespace psrun
