// The cells of a CSV table as the table readers read them (workerd/data/table_reader.h,
// workerd/data/column_table.h): numbers with surrounding spaces, and column lists for messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace psrun::worker {

// `s` without leading and trailing spaces and tabs.
std::string_view trim_cell(std::string_view s);
// A finite float (a leading '+' allowed); false for anything else, an empty cell included.
bool parse_float_cell(std::string_view s, float& v);
// An integer within int64 (a leading '+' allowed).
bool parse_int_cell(std::string_view s, std::int64_t& v);
// "'a', 'b', ... (N in all)": the first 20 names, quoted.
std::string quoted_list(const std::vector<std::string>& names);

}  // namespace psrun::worker
