#include "workerd/nn/field_reader.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace psrun::nn {

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    std::iota(row.begin(), row.end(), std::size_t{0});
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

// Integer-valued JSON numbers (3 or 3.0), else nullopt.
std::optional<std::int64_t> as_integer(const nlohmann::json& v) {
    if (v.is_number_integer()) {
        if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t{INT64_MAX}) return std::nullopt;
        return v.get<std::int64_t>();
    }
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<std::int64_t>(d);
    }
    return std::nullopt;
}

std::string integer_range(std::int64_t min, std::int64_t max) {
    if (min == 1 && max >= kMaxTensorElements) return "a positive integer";
    if (min == 0 && max >= kMaxTensorElements) return "a non-negative integer";
    return "an integer from " + std::to_string(min) + " to " + std::to_string(max);
}

}  // namespace

Result<nlohmann::json> parse_json_text(std::string_view text) {
    try {
        return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::parse_error& e) {
        const std::size_t end = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
        std::size_t line = 1;
        std::size_t column = 1;
        for (std::size_t i = 0; i < end; ++i) {
            if (text[i] == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        std::string what = e.what();
        if (const auto colon = what.find("syntax error"); colon != std::string::npos) what = what.substr(colon);
        return make_error(ErrorCode::kInvalidArgument, "JSON syntax error at line " + std::to_string(line) +
                                                           ", column " + std::to_string(column) + ": " + what);
    } catch (const nlohmann::json::exception& e) {
        // Not a syntax error but still the text's fault: a number out of double's range (406).
        std::string what = e.what();
        if (const auto end = what.find("] "); end != std::string::npos) what = what.substr(end + 2);
        return make_error(ErrorCode::kInvalidArgument, "bad JSON: " + what);
    }
}

std::string describe_value(const nlohmann::json& value) {
    std::string text = value.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return text;
}

std::string closest_name(std::string_view word, const std::vector<std::string_view>& candidates) {
    std::string best;
    std::size_t best_distance = SIZE_MAX;
    for (const auto c : candidates) {
        const std::size_t d = edit_distance(word.substr(0, 64), c);
        if (d < best_distance) {
            best_distance = d;
            best = std::string(c);
        }
    }
    return best;
}

std::string join_names(const std::vector<std::string_view>& names) {
    std::string out;
    for (const auto n : names) out += (out.empty() ? "" : ", ") + std::string(n);
    return out;
}

FieldReader::FieldReader(const nlohmann::json& object, std::string where) : object_(object), where_(std::move(where)) {}

bool FieldReader::has(std::string_view field) const { return object_.contains(field); }

void FieldReader::allow(std::string_view field) { known_.emplace(field); }

const nlohmann::json& FieldReader::raw(std::string_view field) {
    allow(field);
    return object_.at(std::string(field));
}

Error FieldReader::fail(std::string_view field, const std::string& what) const {
    return Error{ErrorCode::kInvalidArgument, where_ + ": field \"" + std::string(field) + "\": " + what};
}

Error FieldReader::missing(std::string_view field, const std::string& expected) const {
    for (const auto& [key, value] : object_.items()) {
        if (known_.count(key) == 0 && edit_distance(key.substr(0, 64), field) <= 2)
            return Error{ErrorCode::kInvalidArgument, where_ + ": unknown field \"" + describe_value(key).substr(1) +
                                                          " (did you mean \"" + std::string(field) + "\"?)"};
    }
    return fail(field, "missing (" + expected + ")");
}

Result<std::int64_t> FieldReader::integer(std::string_view field, std::optional<std::int64_t> fallback,
                                          std::int64_t min, std::int64_t max) {
    allow(field);
    const std::string expected = integer_range(min, max);
    if (!has(field)) {
        if (fallback) return *fallback;
        return tl::unexpected(missing(field, "expected " + expected));
    }
    const auto& v = object_.at(std::string(field));
    const auto i = as_integer(v);
    if (!i || *i < min || *i > max)
        return tl::unexpected(fail(field, "expected " + expected + ", got " + describe_value(v)));
    return *i;
}

Result<Extent2> FieldReader::extent(std::string_view field, std::optional<Extent2> fallback, std::int64_t max) {
    allow(field);
    const std::string expected = "expected " + integer_range(1, max) + " or [height, width] of them";
    if (!has(field)) {
        if (fallback) return *fallback;
        return tl::unexpected(missing(field, expected));
    }
    const auto& v = object_.at(std::string(field));
    auto one = [&](const nlohmann::json& e) -> std::optional<std::int64_t> {
        const auto i = as_integer(e);
        if (!i || *i < 1 || *i > max) return std::nullopt;
        return i;
    };
    if (v.is_array() && v.size() == 2) {
        const auto h = one(v[0]);
        const auto w = one(v[1]);
        if (h && w) return Extent2{*h, *w};
    } else if (const auto i = one(v)) {
        return Extent2{*i, *i};
    }
    return tl::unexpected(fail(field, expected + ", got " + describe_value(v)));
}

Result<std::vector<std::int64_t>> FieldReader::integers(std::string_view field,
                                                        std::optional<std::vector<std::int64_t>> fallback,
                                                        std::size_t count, std::int64_t min, std::int64_t max) {
    allow(field);
    const std::string expected = "expected " + (count ? std::to_string(count) : std::string("1 to 16")) + " of " +
                                 integer_range(min, max) + " in a list";
    if (!has(field)) {
        if (fallback) return *fallback;
        return tl::unexpected(missing(field, expected));
    }
    const auto& v = object_.at(std::string(field));
    std::vector<std::int64_t> out;
    if (v.is_array() && (count ? v.size() == count : (!v.empty() && v.size() <= 16))) {
        for (const auto& e : v) {
            const auto i = as_integer(e);
            if (!i || *i < min || *i > max) break;
            out.push_back(*i);
        }
        if (out.size() == v.size()) return out;
    }
    return tl::unexpected(fail(field, expected + ", got " + describe_value(v)));
}

Result<double> FieldReader::number(std::string_view field, std::optional<double> fallback) {
    allow(field);
    if (!has(field)) {
        if (fallback) return *fallback;
        return tl::unexpected(missing(field, "expected a number"));
    }
    const auto& v = object_.at(std::string(field));
    if (!v.is_number() || !std::isfinite(v.get<double>()))
        return tl::unexpected(fail(field, "expected a number, got " + describe_value(v)));
    return v.get<double>();
}

Result<bool> FieldReader::boolean(std::string_view field, std::optional<bool> fallback) {
    allow(field);
    if (!has(field)) {
        if (fallback) return *fallback;
        return tl::unexpected(missing(field, "expected true or false"));
    }
    const auto& v = object_.at(std::string(field));
    if (!v.is_boolean()) return tl::unexpected(fail(field, "expected true or false, got " + describe_value(v)));
    return v.get<bool>();
}

Result<std::size_t> FieldReader::choice(std::string_view field, std::optional<std::size_t> fallback,
                                        const std::vector<std::string_view>& choices) {
    allow(field);
    const std::string expected = "expected one of " + join_names(choices);
    if (!has(field)) {
        if (fallback) return *fallback;
        return tl::unexpected(missing(field, expected));
    }
    const auto& v = object_.at(std::string(field));
    if (v.is_string()) {
        const auto& s = v.get_ref<const std::string&>();
        const auto it = std::find(choices.begin(), choices.end(), s);
        if (it != choices.end()) return static_cast<std::size_t>(it - choices.begin());
    }
    return tl::unexpected(fail(field, expected + ", got " + describe_value(v)));
}

Result<std::string> FieldReader::string(std::string_view field, std::optional<std::string> fallback) {
    allow(field);
    if (!has(field)) {
        if (fallback) return *fallback;
        return tl::unexpected(missing(field, "expected a string"));
    }
    const auto& v = object_.at(std::string(field));
    if (!v.is_string()) return tl::unexpected(fail(field, "expected a string, got " + describe_value(v)));
    return v.get<std::string>();
}

Result<void> FieldReader::finish() const {
    for (const auto& [key, value] : object_.items()) {
        if (known_.count(key) != 0) continue;
        std::vector<std::string_view> names(known_.begin(), known_.end());
        return tl::unexpected(Error{ErrorCode::kInvalidArgument, where_ + ": unknown field \"" +
                                                                     describe_value(key).substr(1) +
                                                                     " (did you mean \"" + closest_name(key, names) +
                                                                     "\"? known fields: " + join_names(names) + ")"});
    }
    return {};
}

}  // namespace psrun::nn
