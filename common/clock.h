// Small conversions between the clocks the daemons time with (steady for intervals, the system
// clock for the wall times logs and TensorBoard record) and the units they print.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <string>

namespace psrun {

// Seconds on the steady clock since `start`.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Seconds since the Unix epoch (the system clock), as TensorBoard's wall_time.
inline double unix_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A duration given in seconds as whole milliseconds (truncated).
inline std::chrono::milliseconds to_milliseconds(double seconds) {
    return std::chrono::milliseconds(static_cast<long>(seconds * 1000));
}

// "42s", "3m07s", "2h05m": a duration rounded to seconds, for progress lines.
inline std::string format_duration(double seconds) {
    const long s = std::lround(seconds);
    if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s / 60) % 60);
    if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
    return fmt::format("{}s", s);
}

}  // namespace psrun
