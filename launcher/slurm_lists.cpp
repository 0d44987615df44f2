#include "launcher/slurm_lists.h"

#include <fmt/format.h>

#include <cctype>
#include <set>
#include <string>

namespace psrun::launcher {
namespace {

// Whole-string decimal parse with an upper bound; nullopt-like -1 on failure.
long parse_bounded(std::string_view s, long max) {
    if (s.empty() || s.size() > 9) return -1;
    long v = 0;
    for (char c : s) {
        if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
        v = v * 10 + (c - '0');
    }
    return v <= max ? v : -1;
}

std::vector<std::string_view> split_commas(std::string_view text) {
    std::vector<std::string_view> items;
    size_t pos = 0;
    while (true) {
        const size_t comma = text.find(',', pos);
        items.push_back(text.substr(pos, comma == std::string_view::npos ? comma : comma - pos));
        if (comma == std::string_view::npos) break;
        pos = comma + 1;
    }
    return items;
}

}  // namespace

Result<std::vector<int>> parse_tasks_per_node(std::string_view text) {
    auto bad = [&](std::string_view item, std::string_view why) {
        return make_error(ErrorCode::kInvalidArgument, fmt::format("malformed tasks-per-node list '{}': item '{}' {} "
                                                                   "(expected e.g. '4' or '2(x3),1')",
                                                                   text, item, why));
    };
    if (text.empty()) return make_error(ErrorCode::kInvalidArgument, "empty tasks-per-node list");
    std::vector<int> counts;
    for (std::string_view item : split_commas(text)) {
        std::string_view count_text = item;
        long repeat = 1;
        if (const size_t paren = item.find('('); paren != std::string_view::npos) {
            count_text = item.substr(0, paren);
            const std::string_view rest = item.substr(paren);
            if (rest.size() < 4 || rest.substr(0, 2) != "(x" || rest.back() != ')')
                return bad(item, "has a malformed '(xR)' repeat");
            repeat = parse_bounded(rest.substr(2, rest.size() - 3), kMaxTasksPerList);
            if (repeat < 1) return bad(item, "has a repeat that is not a positive number");
        }
        const long count = parse_bounded(count_text, kMaxTasksPerList);
        if (count < 1) return bad(item, "is not a positive task count");
        if (static_cast<long>(counts.size()) + repeat > kMaxTasksPerList) return bad(item, "repeats too often");
        counts.insert(counts.end(), static_cast<size_t>(repeat), static_cast<int>(count));
    }
    long total = 0;
    for (int c : counts) total += c;
    if (total > kMaxTasksPerList)
        return make_error(
            ErrorCode::kInvalidArgument,
            fmt::format("tasks-per-node list '{}' adds up to more than {} tasks", text, kMaxTasksPerList));
    return counts;
}

Result<std::vector<int>> parse_port_list(std::string_view text) {
    auto bad = [&](std::string_view item, std::string_view why) {
        return make_error(ErrorCode::kInvalidArgument, fmt::format("malformed port list '{}': item '{}' {} "
                                                                   "(expected e.g. '20001-20003' or '1000,1002')",
                                                                   text, item, why));
    };
    if (text.empty()) return make_error(ErrorCode::kInvalidArgument, "empty port list");
    std::vector<int> ports;
    std::set<int> seen;
    for (std::string_view item : split_commas(text)) {
        const size_t dash = item.find('-');
        const long low = parse_bounded(item.substr(0, dash), 65535);
        const long high = dash == std::string_view::npos ? low : parse_bounded(item.substr(dash + 1), 65535);
        if (low < 1 || high < 1) return bad(item, "is not a port (1-65535) or port range");
        if (high < low) return bad(item, "goes backwards");
        for (long p = low; p <= high; ++p) {
            if (!seen.insert(static_cast<int>(p)).second) return bad(item, "repeats a port");
            ports.push_back(static_cast<int>(p));
        }
    }
    return ports;
}

}  // namespace psrun::launcher
