// Error values and the Result<T> type used wherever a caller branches on failure
// (bad frame, bad nodelist, bad IDX file). Failures a process cannot recover from
// are thrown instead and caught once in main(); see docs/architecture.md.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include <tl/expected.hpp>

namespace psrun {

enum class ErrorCode {
    kInvalidArgument,  // input (flag, env var, file, frame) is malformed
    kNotFound,         // a required file, variable or key is missing
    kIo,               // a system call failed
    kProtocol,         // a peer broke the wire protocol
    kUnauthorized,     // wrong job token or key
    kTimeout,          // a deadline passed
    kUnsupported,      // the request is valid but cannot be served here
    kRejected,         // psd dropped a non-finite gradient (counted); the run goes on
    kAborted,          // psd stopped the run (e.g. --max-bad-grads reached): every rank stops
};
inline constexpr ErrorCode kLastErrorCode = ErrorCode::kAborted;

struct Error {
    ErrorCode code = ErrorCode::kInvalidArgument;
    std::string message;  // names what is wrong and, where possible, what to do
};

// Result<T>: a T or an Error. Replace with std::expected once the project moves to C++23.
template <class T>
using Result = tl::expected<T, Error>;

[[nodiscard]] inline tl::unexpected<Error> make_error(ErrorCode code, std::string message) {
    return tl::unexpected<Error>(Error{code, std::move(message)});
}
// The two errors parsers return most: bad input (kInvalidArgument), a peer breaking the wire
// protocol (kProtocol).
[[nodiscard]] inline tl::unexpected<Error> invalid_argument(std::string message) {
    return make_error(ErrorCode::kInvalidArgument, std::move(message));
}
[[nodiscard]] inline tl::unexpected<Error> protocol_error(std::string message) {
    return make_error(ErrorCode::kProtocol, std::move(message));
}

// Thrown for a usage or configuration error; main() turns it into exit code 2.
class UsageError : public std::runtime_error {
public:
    explicit UsageError(const std::string& what) : std::runtime_error(what) {}
};

// Exit codes shared by every binary.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

}  // namespace psrun
