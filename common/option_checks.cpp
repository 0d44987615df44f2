#include "common/option_checks.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <ostream>
#include <sstream>
#include <thread>

namespace psrun {
namespace {

std::string format_number(double v) {
    std::ostringstream s;
    s.precision(15);
    s << v;
    return s.str();
}

std::string unit_suffix(const std::string& unit) { return unit.empty() ? std::string() : " (" + unit + ")"; }

// The value as a double when the whole text is a number (strtod's syntax, which includes "nan",
// "inf" and "1e300"); nullopt otherwise.
std::optional<double> parse_double(const std::string& text) {
    if (text.empty()) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) return std::nullopt;
    return v;
}

CLI::Validator range_validator(double lo, double hi, bool open_low, const std::string& unit) {
    const std::string range = (open_low ? "(" : "[") + format_number(lo) + ", " + format_number(hi) + "]";
    auto check = [lo, hi, open_low, range, unit](std::string& text) -> std::string {
        const auto v = parse_double(text);
        if (!v) return "'" + text + "' is not a number: give a number in " + range + unit_suffix(unit);
        if (!std::isfinite(*v)) return text + " is not a finite number: give a number in " + range + unit_suffix(unit);
        if (*v < lo || *v > hi || (open_low && *v == lo))
            return text + " is out of range: give a number in " + range + unit_suffix(unit);
        return {};
    };
    return CLI::Validator(check, range, kRangeCheckName);
}

CLI::Validator integer_validator(std::int64_t lo, std::int64_t hi, const std::string& why) {
    const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    auto check = [lo, hi, range, why](std::string& text) -> std::string {
        const std::string tail = ": give an integer in " + range + why;
        const bool digits = !text.empty() &&
                            std::all_of(text.begin() + ((text[0] == '-' || text[0] == '+') ? 1 : 0), text.end(),
                                        [](char c) { return c >= '0' && c <= '9'; }) &&
                            text.find_first_of("0123456789") != std::string::npos;
        if (!digits) return "'" + text + "' is not an integer" + tail;
        errno = 0;
        const long long v = std::strtoll(text.c_str(), nullptr, 10);
        if (errno == ERANGE || v < lo || v > hi) return text + " is out of range" + tail;
        return {};
    };
    return CLI::Validator(check, range, kRangeCheckName);
}

bool is_numeric_type(const std::string& type) {
    return type == "INT" || type == "UINT" || type == "FLOAT" || type == "NUMBER";
}

// The option's first long name ("--ps-restart-wait"); get_name() is empty for a hidden option.
std::string flag_name(const CLI::Option& opt) {
    if (!opt.get_lnames().empty()) return "--" + opt.get_lnames().front();
    if (!opt.get_snames().empty()) return "-" + opt.get_snames().front();
    return opt.get_name(true);
}

// Calls f(path, option) for every value-taking option of app and its subcommands.
template <class F>
void each_option(CLI::App& app, const std::string& path, F&& f) {
    for (CLI::Option* opt : app.get_options()) {
        if (opt->get_type_size_max() == 0) continue;  // a flag
        f(path, *opt);
    }
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
        each_option(*sub, sub->get_name().empty() ? path : path + " " + sub->get_name(), f);
}

// The option's type without the validators' descriptions ("INT", "FLOAT", "TEXT").
std::string base_type(const CLI::Option& opt) {
    const std::string full = opt.get_type_name();
    return full.substr(0, full.find(':'));
}

}  // namespace

CLI::Validator number_in(double lo, double hi, const std::string& unit) { return range_validator(lo, hi, false, unit); }

CLI::Validator number_above(double lo, double hi, const std::string& unit) {
    return range_validator(lo, hi, true, unit);
}

CLI::Validator seconds_at_least(double lo) { return number_in(lo, kMaxSeconds, "seconds"); }

CLI::Validator positive_seconds() { return number_above(0, kMaxSeconds, "seconds"); }

CLI::Validator integer_in(std::int64_t lo, std::int64_t hi) { return integer_validator(lo, hi, ""); }

CLI::Validator hidden_option_check(const std::string& flag, CLI::Validator check) {
    const std::string description = check.get_description();
    auto named = [flag, check](std::string& text) mutable -> std::string {
        std::string message = check(text);
        return message.empty() ? message : flag + " " + message;
    };
    return CLI::Validator(named, description, kRangeCheckName);
}

int max_threads() {
    const int hw = static_cast<int>(std::thread::hardware_concurrency());
    return std::max(16, 4 * hw);
}

int max_local_processes() {
    const int hw = static_cast<int>(std::thread::hardware_concurrency());
    return std::max(64, 8 * hw);
}

CLI::Validator thread_count(int lo) {
    const unsigned hw = std::thread::hardware_concurrency();
    return integer_validator(
        lo, max_threads(),
        " (the ceiling is max(16, 4 x the " + std::to_string(hw) + " hardware threads of this host))");
}

std::chrono::milliseconds seconds_to_ms(double seconds) {
    if (!(seconds > 0)) return std::chrono::milliseconds(0);
    const double ms = std::min(seconds, kMaxSeconds) * 1000.0;
    return std::chrono::milliseconds(std::max<std::int64_t>(1, std::llround(ms)));  // positive stays positive
}

std::vector<std::string> unchecked_numeric_options(CLI::App& app) {
    std::vector<std::string> unchecked;
    each_option(app, app.get_name(), [&unchecked](const std::string& path, CLI::Option& opt) {
        if (!is_numeric_type(base_type(opt))) return;
        try {
            opt.get_validator(kRangeCheckName);
        } catch (const CLI::OptionNotFound&) {
            unchecked.push_back(path + " " + flag_name(opt));
        }
    });
    return unchecked;
}

void print_numeric_options(CLI::App& app, std::ostream& out) {
    each_option(app, app.get_name(), [&out](const std::string& path, CLI::Option& opt) {
        const std::string type = base_type(opt);
        if (!is_numeric_type(type)) return;
        std::string range = "UNCHECKED";
        try {
            range = opt.get_validator(kRangeCheckName)->get_description();
        } catch (const CLI::OptionNotFound&) {
        }
        out << path << '\t' << flag_name(opt) << '\t' << type << '\t' << range << '\n';
    });
}

bool wants_numeric_option_list(int argc, const char* const* argv) {
    for (int i = 1; i < argc; ++i)
        if (std::string(argv[i]) == "--list-numeric-options") return true;
    return false;
}

}  // namespace psrun
