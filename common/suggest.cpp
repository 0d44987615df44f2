#include "common/suggest.h"

#include <algorithm>

namespace psrun {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    // Three rows of the dynamic programme: two back for the transposition case.
    std::vector<std::size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                cur[j] = std::min(cur[j], before[j - 2] + 1);
        }
        std::swap(before, prev);
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

std::size_t suggestion_limit(std::string_view word) {
    const std::size_t dashes = std::min(word.find_first_not_of('-'), word.size());
    return std::clamp<std::size_t>((word.size() - dashes) / 3, 1, 3);
}

std::optional<std::string> closest_word(std::string_view word, const std::vector<std::string>& candidates) {
    std::optional<std::string> best;
    std::size_t best_distance = suggestion_limit(word) + 1;
    for (const std::string& c : candidates) {
        const std::size_t d = edit_distance(word, c);
        if (d == 0) return std::nullopt;
        if (d < best_distance) {
            best_distance = d;
            best = c;
        }
    }
    return best;
}

}  // namespace psrun
