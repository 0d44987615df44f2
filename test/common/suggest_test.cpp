#include "common/suggest.h"

#include <catch2/catch.hpp>

using psrun::closest_word;
using psrun::edit_distance;
using psrun::suggestion_limit;

TEST_CASE("edit_distance counts edits and adjacent transpositions", "[suggest]") {
    CHECK(edit_distance("", "") == 0);
    CHECK(edit_distance("abc", "") == 3);
    CHECK(edit_distance("", "abc") == 3);
    CHECK(edit_distance("kitten", "sitting") == 3);
    CHECK(edit_distance("--wroker-timeout", "--worker-timeout") == 1);  // one transposition
    CHECK(edit_distance("--worker-timout", "--worker-timeout") == 1);   // one deletion
    CHECK(edit_distance("--steps", "--seed") == 3);
    CHECK(edit_distance("ab", "ba") == 1);
}

TEST_CASE("suggestion_limit grows with the word and ignores the dashes", "[suggest]") {
    CHECK(suggestion_limit("--ps") == 1);
    CHECK(suggestion_limit("--steps") == 1);
    CHECK(suggestion_limit("--batch-size") == 3);
    CHECK(suggestion_limit("--worker-timeout") == 3);
    CHECK(suggestion_limit("") == 1);
}

TEST_CASE("closest_word suggests only a close candidate", "[suggest]") {
    const std::vector<std::string> options{"--ps", "--workers", "--worker-timeout", "--grace", "--threads"};
    CHECK(closest_word("--wroker-timeout", options) == std::optional<std::string>("--worker-timeout"));
    CHECK(closest_word("--worker", options) == std::optional<std::string>("--workers"));
    CHECK(closest_word("--thread", options) == std::optional<std::string>("--threads"));
    CHECK(closest_word("--learning-rate", options) == std::nullopt);  // nothing near
    CHECK(closest_word("--xy", options) == std::nullopt);             // "--ps" is 2 away, limit 1
    CHECK(closest_word("--grace", options) == std::nullopt);          // known: nothing to suggest
    CHECK(closest_word("--anything", {}) == std::nullopt);
}
