#include "workerd/data/csv_reader.h"

namespace psrun::worker {
namespace {

tl::unexpected<Error> bad(const std::string& path, std::size_t line, const std::string& problem) {
    return make_error(ErrorCode::kInvalidArgument, path + ": line " + std::to_string(line) + ": " + problem);
}

}  // namespace

Result<void> parse_csv(std::string_view text, char delimiter, const std::string& path, const CsvRowHandler& on_row) {
    std::vector<std::string> fields;
    std::size_t columns = 0;  // from the header
    bool header = true;
    std::size_t line = 1;
    std::size_t i = 0;
    if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // a UTF-8 byte order mark (Excel writes one)
    while (i < text.size()) {
        const std::size_t row_line = line;
        fields.clear();
        // A blank line (LF or CRLF only) is skipped.
        if (text[i] == '\n' || (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n')) {
            i += text[i] == '\r' ? 2 : 1;
            ++line;
            continue;
        }
        while (true) {  // one field per turn
            std::string field;
            if (i < text.size() && text[i] == '"') {
                ++i;
                while (true) {
                    if (i >= text.size())
                        return bad(path, row_line, "a quoted field is not closed before the end of the file");
                    const char c = text[i++];
                    if (c == '"') {
                        if (i < text.size() && text[i] == '"') {
                            field += '"';
                            ++i;
                            continue;
                        }
                        break;
                    }
                    if (c == '\n') ++line;
                    field += c;
                }
                if (i < text.size() && text[i] != delimiter && text[i] != '\n' && text[i] != '\r')
                    return bad(path, line, "characters after the closing quote of a field");
            } else {
                const std::size_t start = i;
                while (i < text.size() && text[i] != delimiter && text[i] != '\n' && text[i] != '\r') {
                    if (text[i] == '"')
                        return bad(path, line, "a quote inside an unquoted field (quote the whole field)");
                    ++i;
                }
                field.assign(text.substr(start, i - start));
            }
            fields.push_back(std::move(field));
            if (i < text.size() && text[i] == delimiter) {
                ++i;
                continue;
            }
            if (i < text.size() && text[i] == '\r') {
                if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
                else return bad(path, line, "a carriage return not followed by a line feed");
            }
            if (i < text.size()) {  // '\n'
                ++i;
                ++line;
            }
            break;
        }
        if (header) {
            columns = fields.size();
            header = false;
        } else if (fields.size() != columns) {
            return bad(path, row_line,
                       std::to_string(fields.size()) + " fields, but the header names " + std::to_string(columns) +
                           " columns");
        }
        if (auto ok = on_row(fields, row_line); !ok) return ok;
    }
    if (header) return make_error(ErrorCode::kInvalidArgument, path + ": empty (a CSV file starts with a header line)");
    return {};
}

}  // namespace psrun::worker
