// CHUNK bodies (common/wire_chunks.cpp, elastic data): round trips and refusals.
#include <catch2/catch.hpp>

#include "common/wire.h"

using namespace psrun::wire;

TEST_CASE("wire: CHUNK request and grant round trip", "[wire][chunks]") {
    ChunkRequest r{60000, 60, 7, true, {{0, 3}, {1, 59}}};
    auto back = decode_chunk_request(encode_chunk_request(r));
    REQUIRE(back);
    CHECK(*back == r);
    ChunkGrant g{true, {2, 5}, 5000, 1000};
    auto gb = decode_chunk_grant(encode_chunk_grant(g));
    REQUIRE(gb);
    CHECK(*gb == g);
    auto none = decode_chunk_grant(encode_chunk_grant(ChunkGrant{}));
    REQUIRE(none);
    CHECK_FALSE(none->leased);
}

TEST_CASE("wire: bad CHUNK bodies are refused", "[wire][chunks]") {
    const std::string good = encode_chunk_request(ChunkRequest{100, 10, 1, false, {{0, 9}}});
    CHECK(decode_chunk_request(good));
    CHECK_FALSE(decode_chunk_request(good.substr(0, good.size() - 1)));                          // truncated
    CHECK_FALSE(decode_chunk_request(good + "x"));                                               // trailing byte
    CHECK_FALSE(decode_chunk_request(encode_chunk_request(ChunkRequest{10, 11, 1, true, {}})));  // chunks > examples
    CHECK_FALSE(
        decode_chunk_request(encode_chunk_request(ChunkRequest{100, 10, 1, true, {{0, 10}}})));  // chunk 10 of 10
    ChunkRequest many{100, 10, 1, true, std::vector<ChunkRef>(kMaxChunkReports + 1)};
    CHECK_FALSE(decode_chunk_request(encode_chunk_request(many)));
    std::string want2 = good;
    want2[20] = 2;  // the want byte (after 8 + 4 + 8 bytes)
    CHECK_FALSE(decode_chunk_request(want2));
    CHECK_FALSE(decode_chunk_grant(encode_chunk_grant(ChunkGrant{true, {0, 0}, 0, 0})));  // empty chunk
    CHECK_FALSE(decode_chunk_grant(std::string(1, '\2')));
}
