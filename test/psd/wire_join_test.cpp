// JOIN bodies (common/wire_join.cpp, workers that join a running job): round trips and refusals.
#include <catch2/catch.hpp>

#include "common/wire.h"

using namespace psrun::wire;

TEST_CASE("wire: JOIN request and grant round trip", "[wire][join]") {
    const JoinRequest r{ModelId{"dls_mlp", std::string(64, 'a')}, 60};
    auto back = decode_join_request(encode_join_request(r));
    REQUIRE(back);
    CHECK(*back == r);
    const JoinRequest tool{ModelId{"x", ""}, 1};
    auto tb = decode_join_request(encode_join_request(tool));
    REQUIRE(tb);
    CHECK(*tb == tool);
    const JoinGrant g{3, 2, 4};
    auto gb = decode_join_grant(encode_join_grant(g));
    REQUIRE(gb);
    CHECK(*gb == g);
    CHECK(to_string(MessageType::kJoin) == "JOIN");
}

TEST_CASE("wire: bad JOIN bodies are refused", "[wire][join]") {
    const std::string good = encode_join_request(JoinRequest{ModelId{"m", ""}, 10});
    CHECK(decode_join_request(good));
    CHECK_FALSE(decode_join_request(good.substr(0, good.size() - 1)));                        // truncated
    CHECK_FALSE(decode_join_request(good + "x"));                                             // trailing byte
    CHECK_FALSE(decode_join_request(encode_join_request(JoinRequest{ModelId{"m", ""}, 0})));  // no chunks
    CHECK_FALSE(decode_join_request(encode_join_request(JoinRequest{ModelId{"m", ""}, kMaxJoinChunks + 1})));
    CHECK_FALSE(decode_join_request(encode_join_request(JoinRequest{ModelId{"", ""}, 10})));      // no name
    CHECK_FALSE(decode_join_request(encode_join_request(JoinRequest{ModelId{"m", "XYZ"}, 10})));  // bad hash
    CHECK_FALSE(decode_join_grant(encode_join_grant(JoinGrant{4, 2, 4})));                        // index not below max
    CHECK_FALSE(decode_join_grant(encode_join_grant(JoinGrant{0, 0, 4})));                        // no workers
    CHECK_FALSE(decode_join_grant(encode_join_grant(JoinGrant{0, 5, 4})));  // more workers than the max
    CHECK_FALSE(decode_join_grant(encode_join_grant(JoinGrant{1, 2, 4}) + "x"));
}

TEST_CASE("wire: the JOIN flag is known, HELLO may carry it", "[wire][join]") {
    Header h;
    h.type = MessageType::kHello;
    h.flags = kFlagJoin;
    h.index = 3;
    auto back = decode_header(encode_header(h));
    REQUIRE(back);
    CHECK(back->flags == kFlagJoin);
    h.flags = 1u << 14;  // beyond the known flags (BACKGROUND is bit 13)
    CHECK_FALSE(decode_header(encode_header(h)));
}
