// valid_utf8 (common/utf8.h): valid text unchanged, a bad byte U+FFFD, and the result dumps as JSON.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "common/utf8.h"

TEST_CASE("valid_utf8 keeps valid text and replaces bad bytes with U+FFFD", "[utf8]") {
    CHECK(psrun::valid_utf8("cat") == "cat");
    CHECK(psrun::valid_utf8("caf\xc3\xa9 \xe6\x97\xa5") == "caf\xc3\xa9 \xe6\x97\xa5");  // café 日
    CHECK(psrun::valid_utf8("cat\xff") == "cat\xef\xbf\xbd");
    CHECK(psrun::valid_utf8("\xc3") == "\xef\xbf\xbd");  // a sequence cut short
    CHECK(psrun::valid_utf8("") == "");
    const std::string repaired = psrun::valid_utf8("a\xfe\xff" "b");
    CHECK_NOTHROW(nlohmann::json(repaired).dump());
}
