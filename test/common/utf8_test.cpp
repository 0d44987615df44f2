// valid_utf8 and json_text (common/utf8.h): valid text unchanged, a bad byte U+FFFD, records dump as JSON.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "common/utf8.h"

TEST_CASE("valid_utf8 keeps valid text and replaces bad bytes with U+FFFD", "[utf8]") {
    CHECK(psrun::valid_utf8("cat") == "cat");
    CHECK(psrun::valid_utf8("caf\xc3\xa9 \xe6\x97\xa5") == "caf\xc3\xa9 \xe6\x97\xa5");  // café 日
    CHECK(psrun::valid_utf8("cat\xff") == "cat\xef\xbf\xbd");
    CHECK(psrun::valid_utf8("\xc3") == "\xef\xbf\xbd");  // a sequence cut short
    CHECK(psrun::valid_utf8("") == "");
    const std::string repaired = psrun::valid_utf8(
        "a\xfe\xff"
        "b");
    CHECK_NOTHROW(nlohmann::json(repaired).dump());
}

TEST_CASE("json_text writes a record whose strings are not UTF-8, as dump() would not", "[utf8]") {
    const nlohmann::json record{{"train", "/data/caf\xe9/train-*"}, {"steps", 5}};
    CHECK_THROWS(record.dump());  // nlohmann's default
    CHECK(psrun::json_text(record) == "{\"steps\":5,\"train\":\"/data/caf\xef\xbf\xbd/train-*\"}");
    CHECK(psrun::json_text(nlohmann::json{{"a", 1}}, 2) == nlohmann::json{{"a", 1}}.dump(2));
}
