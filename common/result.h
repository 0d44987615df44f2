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

// Error propagation: PSRUN_TRY(expr) evaluates a Result and, if it holds an error, returns that
// error from the enclosing function (whose Result may hold another type); the value, if any, is
// dropped. PSRUN_TRY_ASSIGN(decl, expr) does the same and otherwise moves the value into `decl`
// (`auto x`, `const auto x` or an existing variable). Both are statements; expr may hold commas.
#define PSRUN_TRY(...)                                                                                          \
    do {                                                                                                        \
        if (auto psrun_try_ = (__VA_ARGS__); !psrun_try_) return tl::unexpected(std::move(psrun_try_).error()); \
    } while (false)
#define PSRUN_TRY_CONCAT_(a, b) a##b
#define PSRUN_TRY_NAME_(line) PSRUN_TRY_CONCAT_(psrun_try_, line)
#define PSRUN_TRY_ASSIGN(decl, ...) PSRUN_TRY_ASSIGN_(PSRUN_TRY_NAME_(__LINE__), decl, __VA_ARGS__)
#define PSRUN_TRY_ASSIGN_(tmp, decl, ...)                    \
    auto tmp = (__VA_ARGS__);                                \
    if (!tmp) return tl::unexpected(std::move(tmp).error()); \
    decl = std::move(*tmp)

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
