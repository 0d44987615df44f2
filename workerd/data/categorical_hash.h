// The ids of categorical values (docs/data.md "Recommender tables"): a value of a CSV cell is
// hashed once, when the table is loaded, to a stable 64-bit number (XXH3, libxxhash), and that
// number is reduced to the rows [0, V) of the embedding that reads the input (hash buckets, as
// TF's categorical_column_with_hash_bucket). Pure functions of their arguments: the same column
// and value give the same id in every run, on every host and thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace psrun::worker {

// The text a value is hashed as: surrounding spaces and tabs dropped; a decimal integer (an
// optional sign, then digits, within int64) written canonically, so "7", "+7", "007" and " 7"
// are one value ("-0" is "0"); anything else (hex codes such as "68fd1e64", words, "7.0")
// exactly as written.
std::string canonical_value(std::string_view value);

// The 64-bit id of `value` in the column named `key`: XXH3_64bits_withSeed(canonical_value(value),
// seed = XXH3_64bits(key)). The key keeps equal strings of two columns apart. Unreduced: the
// raw-id tables of psd (issue 36) take it as it is.
std::uint64_t categorical_hash(std::string_view key, std::string_view value);

// The same in two steps, for a loader that hashes many values of one column: the column's seed
// once, then each value. categorical_hash(k, v) == seeded_hash(column_seed(k), v).
std::uint64_t column_seed(std::string_view key);
std::uint64_t seeded_hash(std::uint64_t seed, std::string_view value);

// `hash` reduced to a row of a table of `rows` rows: hash % rows. REQUIRES: 0 < rows <= 2^31.
std::int32_t hash_bucket(std::uint64_t hash, std::int64_t rows);

}  // namespace psrun::worker
