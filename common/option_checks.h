// The one place where numeric command-line options are checked (issue 38). Every integer or
// floating-point option of psrun (each subcommand), psd and workerd carries one of the validators
// below: the value must be a finite number (integer options: decimal digits) inside a stated
// range, else CLI11 stops the parse with "--flag: VALUE is not ...: give ... in [LO, HI]" and the
// program exits 2 (kExitUsage). unchecked_numeric_options() finds an option that lacks one, so a
// forgotten check fails test/launcher/numeric_options_test.sh.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace psrun {

// Ceiling of every duration option: 10^6 s (11.6 days). Any checked duration converts to
// milliseconds (seconds_to_ms) without overflow, and fits the int milliseconds ZeroMQ takes.
inline constexpr double kMaxSeconds = 1e6;

// Ceiling of counts of processes or tasks in one job (--ps, --num-workers, --index ...).
inline constexpr std::int64_t kMaxTasks = 4096;

// The name every validator below carries (CLI::Option::get_validator looks it up).
inline constexpr const char* kRangeCheckName = "psrun-range";

// A finite number in [lo, hi]. `unit` ("seconds", "") is appended to the message.
CLI::Validator number_in(double lo, double hi, const std::string& unit = "");

// A finite number in (lo, hi]: rates and timeouts that must not be zero.
CLI::Validator number_above(double lo, double hi, const std::string& unit = "");

// Seconds in [lo, kMaxSeconds] (number_above when `positive`: (0, kMaxSeconds]).
CLI::Validator seconds_at_least(double lo);
CLI::Validator positive_seconds();

// An integer written in decimal (optional sign) in [lo, hi]; "1e3", "0x10", "nan" are refused.
CLI::Validator integer_in(std::int64_t lo, std::int64_t hi);

// `check` for an option hidden from --help (group ""): CLI11 names no flag in its message for
// those, so the message starts with `flag` itself.
CLI::Validator hidden_option_check(const std::string& flag, CLI::Validator check);

// The most threads one thread-count option may ask for on this host:
// max(16, 4 x std::thread::hardware_concurrency()).
int max_threads();

// Processes psrun local may start on this host per role: max(64, 8 x hardware threads).
int max_local_processes();

// An integer in [lo, max_threads()]; the message names this host's hardware threads.
CLI::Validator thread_count(int lo);

// Seconds (already checked to be finite and in [0, kMaxSeconds]) as milliseconds; NaN and
// negative values give 0, positive ones at least 1 ms, values above kMaxSeconds give kMaxSeconds, so
// the cast never overflows.
std::chrono::milliseconds seconds_to_ms(double seconds);

// "psrun run --ps", "psd --threads": each integer or floating-point option of `app` and of its
// subcommands (recursively) that has no validator from this file. Flags are not options here.
std::vector<std::string> unchecked_numeric_options(CLI::App& app);

// One line per numeric option of `app` and its subcommands:
// "<command path>\t<flag>\t<type>\t<range or UNCHECKED>", e.g. "psrun local\t--grace\tFLOAT\t[0, 1000000]".
void print_numeric_options(CLI::App& app, std::ostream& out);

// True when argv holds --list-numeric-options (a hidden flag of every binary, read before CLI11
// parses so required options need not be given; the mains then print_numeric_options and exit 0).
bool wants_numeric_option_list(int argc, const char* const* argv);

}  // namespace psrun
