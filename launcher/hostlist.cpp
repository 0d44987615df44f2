#include "launcher/hostlist.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <slurm/slurm.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <set>

namespace psrun::launcher {
namespace {

bool is_host_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }

auto bad(std::string_view list, const std::string& why) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("malformed hostlist '{}': {}", list, why));
}

// Parses a run of digits; false on empty or too long.
bool parse_number(std::string_view s, unsigned long& value) {
    if (s.empty() || s.size() > 9) return false;
    value = 0;
    for (char c : s) {
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
        value = value * 10 + static_cast<unsigned long>(c - '0');
    }
    return true;
}

// Counts the hosts of one bracket body "1-3,7"; 0 on error with `why` set.
size_t range_count(std::string_view body, std::string& why) {
    if (body.empty()) {
        why = "empty brackets '[]'";
        return 0;
    }
    size_t count = 0;
    size_t pos = 0;
    while (pos <= body.size()) {
        const size_t comma = body.find(',', pos);
        const std::string_view item =
            body.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
        const size_t dash = item.find('-');
        unsigned long low = 0;
        unsigned long high = 0;
        const bool ok = dash == std::string_view::npos
                            ? parse_number(item, low) && ((high = low), true)
                            : parse_number(item.substr(0, dash), low) && parse_number(item.substr(dash + 1), high);
        if (!ok) {
            why = fmt::format("bad range '{}' (expected N or N-M with digits)", item);
            return 0;
        }
        if (high < low) {
            why = fmt::format("range '{}' goes backwards", item);
            return 0;
        }
        count += high - low + 1;
        if (count > kMaxHosts) {
            why = fmt::format("expands to more than {} hosts", kMaxHosts);
            return 0;
        }
        if (comma == std::string_view::npos) break;
        pos = comma + 1;
    }
    return count;
}

// Redirects fd 2 to /dev/null for its lifetime (libslurm logs parse errors there).
class StderrSilencer {
  public:
    StderrSilencer() : saved_(::dup(2)) {
        const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (saved_ >= 0 && null_fd >= 0) ::dup2(null_fd, 2);
        if (null_fd >= 0) ::close(null_fd);
    }
    ~StderrSilencer() {
        if (saved_ >= 0) {
            ::dup2(saved_, 2);
            ::close(saved_);
        }
    }
    StderrSilencer(const StderrSilencer&) = delete;
    StderrSilencer& operator=(const StderrSilencer&) = delete;

  private:
    int saved_;
};

}  // namespace

Result<size_t> check_hostlist(std::string_view list) {
    if (list.empty()) return bad(list, "it is empty");
    size_t total = 0;
    size_t item_hosts = 1;   // product of the bracket counts of the current item
    bool item_empty = true;  // no character seen in the current item
    for (size_t i = 0; i < list.size(); ++i) {
        const char c = list[i];
        if (c == ',') {
            if (item_empty) return bad(list, fmt::format("empty host name at offset {}", i));
            total += item_hosts;
            item_hosts = 1;
            item_empty = true;
        } else if (c == '[') {
            const size_t close = list.find_first_of("[]", i + 1);
            if (close == std::string_view::npos || list[close] != ']')
                return bad(list, close == std::string_view::npos ? fmt::format("'[' at offset {} is never closed", i)
                                                                 : fmt::format("nested '[' at offset {}", close));
            std::string why;
            const size_t n = range_count(list.substr(i + 1, close - i - 1), why);
            if (n == 0) return bad(list, why);
            item_hosts *= n;
            if (item_hosts > kMaxHosts) return bad(list, fmt::format("expands to more than {} hosts", kMaxHosts));
            // libslurm 22.05 rejects text after the last bracket group of a host ("n[1-2]-ib").
            const size_t next = list.find_first_of(",[", close + 1);
            if (close + 1 < list.size() && list[close + 1] != ',' &&
                (next == std::string_view::npos || list[next] == ','))
                return bad(list, fmt::format("text after ']' at offset {} is not supported "
                                             "(libslurm cannot expand a suffix after a range)",
                                             close));
            item_empty = false;
            i = close;
        } else if (c == ']') {
            return bad(list, fmt::format("']' at offset {} without '['", i));
        } else if (!is_host_char(c)) {
            return bad(list, fmt::format("unexpected character '{}' at offset {}", c, i));
        } else {
            item_empty = false;
        }
    }
    if (item_empty) return bad(list, "it ends with ','");
    total += item_hosts;
    if (total > kMaxHosts) return bad(list, fmt::format("expands to more than {} hosts", kMaxHosts));
    return total;
}

Result<std::vector<std::string>> expand_hostlist(std::string_view list) {
    const Result<size_t> expected_count = check_hostlist(list);
    if (!expected_count) return tl::unexpected(expected_count.error());
    const std::string text(list);
    std::vector<std::string> hosts;
    {
        StderrSilencer quiet;
        hostlist_t hl = slurm_hostlist_create(text.c_str());
        if (hl == nullptr) return bad(list, "libslurm could not parse it");
        while (char* host = slurm_hostlist_shift(hl)) {
            hosts.emplace_back(host);
            std::free(host);  // slurm_hostlist_shift returns malloc()ed memory
        }
        slurm_hostlist_destroy(hl);
    }
    if (hosts.size() != *expected_count)
        return bad(list, fmt::format("libslurm expanded it to {} hosts, expected {}", hosts.size(), *expected_count));
    std::set<std::string_view> seen;
    for (const std::string& h : hosts)
        if (!seen.insert(h).second) return bad(list, fmt::format("host '{}' appears twice", h));
    return hosts;
}

}  // namespace psrun::launcher
