// Typed, checked reads of one JSON object's fields, with errors that say where (the caller's
// context, e.g. `model F: layer 3 (max_pool "pool2")`) and which field, and what was expected
// and found. Every read marks the field as known; finish() then rejects any other field,
// naming the closest known one.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/nn/shape.h"

namespace psrun::nn {

class FieldReader {
  public:
    // REQUIRES: object.is_object(); object outlives the reader.
    FieldReader(const nlohmann::json& object, std::string where);

    const std::string& where() const { return where_; }
    bool has(std::string_view field) const;
    // Marks `field` as known without reading it (read elsewhere, e.g. "kind").
    void allow(std::string_view field);

    // An integer in [min, max]; `fallback` when absent (absent without fallback: an error).
    Result<std::int64_t> integer(std::string_view field, std::optional<std::int64_t> fallback, std::int64_t min,
                                 std::int64_t max);
    // An integer or [h, w] of integers, each in [1, max].
    Result<Extent2> extent(std::string_view field, std::optional<Extent2> fallback, std::int64_t max);
    // A list of integers, each in [min, max]: exactly `count` of them (count 0: 1 or more, at
    // most 16); `fallback` when absent.
    Result<std::vector<std::int64_t>> integers(std::string_view field,
                                               std::optional<std::vector<std::int64_t>> fallback, std::size_t count,
                                               std::int64_t min, std::int64_t max);
    // A finite number; the caller checks its range (with fail()).
    Result<double> number(std::string_view field, std::optional<double> fallback);
    Result<bool> boolean(std::string_view field, std::optional<bool> fallback);
    // One of `choices`; returns its index.
    Result<std::size_t> choice(std::string_view field, std::optional<std::size_t> fallback,
                               const std::vector<std::string_view>& choices);
    Result<std::string> string(std::string_view field, std::optional<std::string> fallback);
    // The raw value (marks the field known). REQUIRES: has(field).
    const nlohmann::json& raw(std::string_view field);

    // `<where>: field "<field>": <what>`.
    Error fail(std::string_view field, const std::string& what) const;
    // An error for the first field no read asked for, naming the closest known field.
    Result<void> finish() const;

  private:
    // A missing required field; when a field nobody reads is spelt close to it ("filter" for
    // "filters"), the error names that one instead.
    Error missing(std::string_view field, const std::string& expected) const;
    const nlohmann::json& object_;
    std::string where_;
    std::set<std::string, std::less<>> known_;
};

// `text` as one JSON document. Errors (kInvalidArgument, no prefix): "JSON syntax error at line
// L, column C: ..." or "bad JSON: ..." (a number out of double's range).
Result<nlohmann::json> parse_json_text(std::string_view text);
// The value as JSON text, shortened to about 40 characters, for error messages.
std::string describe_value(const nlohmann::json& value);
// The entry of `candidates` with the smallest edit distance to `word` ("" when empty).
std::string closest_name(std::string_view word, const std::vector<std::string_view>& candidates);
// "a, b, c".
std::string join_names(const std::vector<std::string_view>& names);

}  // namespace psrun::nn
