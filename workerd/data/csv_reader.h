// CSV as RFC 4180 writes it (and pandas' to_csv, Excel): fields separated by a delimiter (','
// or, for .tsv, a tab), optionally in double quotes (a quote inside doubled: ""), quoted fields
// may hold the delimiter and line breaks; lines end in LF or CRLF; the first line names the
// columns; blank lines are skipped. Rows are handed to a callback one at a time, so memory does
// not grow with the file beyond the text itself. Errors (kInvalidArgument) name the file and line.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

// Called with the header first (line 1), then every row: its fields (unquoted) and the line it
// starts on. A row with another number of fields than the header is an error before the call.
// Returning an error stops the parse with it.
using CsvRowHandler = std::function<Result<void>(const std::vector<std::string>& fields, std::size_t line)>;

[[nodiscard]] Result<void> parse_csv(std::string_view text, char delimiter, const std::string& path,
                                     const CsvRowHandler& on_row);

}  // namespace psrun::worker
