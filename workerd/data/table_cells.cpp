#include "workerd/data/table_cells.h"

#include <charconv>
#include <cmath>

namespace psrun::worker {

std::string_view trim_cell(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool parse_float_cell(std::string_view s, float& v) {
    s = trim_cell(s);
    if (!s.empty() && s.front() == '+') s.remove_prefix(1);
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && ec == std::errc() && p == s.data() + s.size() && std::isfinite(v);
}

bool parse_int_cell(std::string_view s, std::int64_t& v) {
    s = trim_cell(s);
    if (!s.empty() && s.front() == '+') s.remove_prefix(1);
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

std::string quoted_list(const std::vector<std::string>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size() && i < 20; ++i) s += (i ? ", '" : "'") + v[i] + "'";
    if (v.size() > 20) s += ", ... (" + std::to_string(v.size()) + " in all)";
    return s;
}

}  // namespace psrun::worker
