// "Did you mean ...?" for command lines: the closest known word to a misspelled one.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace psrun {

// Optimal string alignment distance: insertions, deletions, substitutions and transpositions
// of two adjacent characters each cost 1 ("wroker" -> "worker" is 1).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The largest distance at which `word` still gets a suggestion: a third of its length (leading
// dashes not counted), at least 1 and at most 3, so a short word is not "corrected" into an
// unrelated short one.
std::size_t suggestion_limit(std::string_view word);

// The candidate closest to `word` within suggestion_limit(word), the first one on ties; nullopt
// when none is close enough or `word` is itself a candidate.
std::optional<std::string> closest_word(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace psrun
