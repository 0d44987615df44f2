// common/message_auth.h without sockets: the sealer and the verifier exchange frames directly,
// with the real AES-GCM of libcrypto. Every way a message can be forged, altered or replayed is
// refused; the honest exchange passes.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "common/job_keys.h"
#include "common/message_auth.h"

using namespace psrun;

namespace {

using Frames = std::vector<std::string>;

std::vector<ByteRange> ranges(const Frames& frames) {
    std::vector<ByteRange> out;
    for (const auto& f : frames) out.push_back(ByteRange{f.data(), f.size()});
    return out;
}

JobKeys keys_or_fail() {
    auto k = generate_job_keys();
    REQUIRE(k);
    return *k;
}

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace

TEST_CASE("a sealed request verifies once, and its sealed reply answers it", "[auth]") {
    const JobKeys keys = keys_or_fail();
    MessageSealer client(keys);
    MessageVerifier psd(keys, 1, std::chrono::seconds(300));
    const Frames request{"header-bytes", std::string(100000, 'g'), "body"};
    const std::string trailer = client.seal(1, ranges(request));
    REQUIRE(trailer.size() == kTrailerSize);
    REQUIRE(psd.verify("conn-a", ranges(request), trailer));
    CHECK(psd.sessions() == 1);

    REQUIRE(psd.can_seal("conn-a"));
    CHECK_FALSE(psd.can_seal("conn-b"));
    const Frames reply{"reply-header", std::string(5000, 'p')};
    auto sealed = psd.seal_reply("conn-a", ranges(reply));
    REQUIRE(sealed);
    CHECK(client.open(1, ranges(reply), *sealed));

    SECTION("the same request again is a replay, on any connection") {
        auto again = psd.verify("conn-b", ranges(request), trailer);
        REQUIRE_FALSE(again);
        CHECK(again.error().code == ErrorCode::kUnauthorized);
        CHECK_THAT(again.error().message, Catch::Contains("replayed"));
        CHECK_FALSE(psd.can_seal("conn-b"));  // a refused request binds no reply
    }
    SECTION("an altered reply, or a reply for another shard, does not open") {
        Frames altered = reply;
        altered[1][4999] = 'q';
        CHECK_FALSE(client.open(1, ranges(altered), *sealed));
        CHECK_FALSE(client.open(2, ranges(reply), *sealed));
    }
    SECTION("an old reply does not answer the next request") {
        const std::string next = client.seal(1, ranges(request));
        REQUIRE(psd.verify("conn-a", ranges(request), next));
        auto err = client.open(1, ranges(reply), *sealed);
        REQUIRE_FALSE(err);
        CHECK_THAT(err.error().message, Catch::Contains("does not answer"));
        auto fresh = psd.seal_reply("conn-a", ranges(reply));
        REQUIRE(fresh);
        CHECK(client.open(1, ranges(reply), *fresh));
    }
    SECTION("a second reply to one request has its own nonce and also opens") {
        auto second = psd.seal_reply("conn-a", ranges(reply));
        REQUIRE(second);
        CHECK(*second != *sealed);
        CHECK(client.open(1, ranges(reply), *second));
    }
}

TEST_CASE("any altered byte, another job's key or another shard is refused", "[auth]") {
    const JobKeys keys = keys_or_fail();
    MessageSealer client(keys);
    MessageVerifier psd(keys, 0, std::chrono::seconds(300));
    const Frames request{"header-bytes", std::string(4096, 'g')};

    SECTION("payload, header and every trailer field") {
        const std::string trailer = client.seal(0, ranges(request));
        Frames payload = request;
        payload[1][2048] ^= 1;
        CHECK_THAT(psd.verify("c", ranges(payload), trailer).error().message, Catch::Contains("MAC does not verify"));
        Frames header = request;
        header[0][0] = 'H';
        CHECK_FALSE(psd.verify("c", ranges(header), trailer));
        Frames split{"header-bytesg", std::string(4095, 'g')};  // same bytes, other frame boundary
        CHECK_FALSE(psd.verify("c", ranges(split), trailer));
        for (std::size_t i = 0; i < kTrailerSize; ++i) {
            std::string t = trailer;
            t[i] ^= 0x10;
            INFO("trailer byte " << i);
            CHECK_FALSE(psd.verify("c", ranges(request), t));
        }
        CHECK_FALSE(psd.verify("c", ranges(request), trailer.substr(1)));
        CHECK(psd.verify("c", ranges(request), trailer));  // the original still passes
    }
    SECTION("a sealer with another job's keys, even with this job's token") {
        JobKeys other = keys_or_fail();
        other.token = keys.token;
        MessageSealer stranger(other);
        auto r = psd.verify("c", ranges(request), stranger.seal(0, ranges(request)));
        REQUIRE_FALSE(r);
        CHECK(psd.sessions() == 0);  // a stranger creates no state
    }
    SECTION("a request for shard 1 forwarded to shard 0") {
        auto r = psd.verify("c", ranges(request), client.seal(1, ranges(request)));
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains("for ps 1"));
    }
}

TEST_CASE("messages outside the time window are refused; quiet sessions are pruned", "[auth]") {
    const JobKeys keys = keys_or_fail();
    MessageVerifier psd(keys, 0, std::chrono::seconds(60));
    const Frames request{"header-bytes", "payload"};
    // A well-formed, correctly tagged request stamped `age` ago, as a replay of a recording would be.
    auto stamped = [&](std::int64_t age_ns, std::uint64_t seq) {
        Trailer t;
        t.session.fill(7);
        t.seq = seq;
        t.sent_ns = now_ns() - age_ns;
        t.tag = message_tag(GmacKey(session_key(mac_master_key(keys), t.session)), t, false, ranges(request));
        return encode_trailer(t);
    };
    auto old = psd.verify("c", ranges(request), stamped(61'000'000'000, 1));
    REQUIRE_FALSE(old);
    CHECK_THAT(old.error().message, Catch::Contains("before this host's clock") && Catch::Contains("NTP"));
    auto future = psd.verify("c", ranges(request), stamped(-61'000'000'000, 2));
    REQUIRE_FALSE(future);
    CHECK_THAT(future.error().message, Catch::Contains("ahead of"));
    REQUIRE(psd.verify("c", ranges(request), stamped(30'000'000'000, 3)));  // within the window
    CHECK(psd.sessions() == 1);
    psd.prune();
    CHECK(psd.sessions() == 1);                                    // just seen
    CHECK_FALSE(psd.verify("c", ranges(request), stamped(0, 3)));  // its sequence number is used
    REQUIRE(psd.verify("c", ranges(request), stamped(0, 4)));
}

TEST_CASE("the auth mode is mac or curve", "[auth]") {
    CHECK(parse_auth_mode("mac") == AuthMode::kMac);
    CHECK(parse_auth_mode("curve") == AuthMode::kCurve);
    auto bad = parse_auth_mode("none");
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("--auth must be mac") && Catch::Contains("'none'"));
    CHECK(to_string(AuthMode::kMac) == "mac");
}

TEST_CASE("big frames are tagged in chunks: the tag does not depend on the threads, and covers every byte", "[auth]") {
    const JobKeys keys = keys_or_fail();
    const GmacKey key(session_key(mac_master_key(keys), SessionId{}));
    Trailer t;
    t.seq = 9;
    Frames frames{"header", std::string(kMacChunk * 3 + 100, 'a'), std::string(kMacChunk, 'b'), "x"};
    ThreadTeam team(3);
    const auto alone = message_tag(key, t, false, ranges(frames));
    CHECK(message_tag(key, t, false, ranges(frames), &team) == alone);
    CHECK(message_tag(key, t, true, ranges(frames), &team) != alone);  // the reply direction has its own nonces
    for (std::size_t at : {std::size_t{0}, kMacChunk - 1, kMacChunk, 2 * kMacChunk + 7, 3 * kMacChunk + 99}) {
        Frames altered = frames;
        altered[1][at] ^= 0x40;
        INFO("byte " << at);
        CHECK(message_tag(key, t, false, ranges(altered), &team) != alone);
    }
    Frames swapped = frames;  // two chunks of equal content exchanged: still another message
    swapped[1].replace(0, 4, "zzzz");
    Frames swapped2 = frames;
    swapped2[1].replace(kMacChunk, 4, "zzzz");
    CHECK(message_tag(key, t, false, ranges(swapped), &team) != message_tag(key, t, false, ranges(swapped2), &team));
}

TEST_CASE("ipsec-mb's GMAC equals libcrypto's on every length", "[auth]") {
    if (!gmac_accelerated()) {
        WARN("this build has no ipsec-mb: only libcrypto's GMAC runs");
        return;
    }
    MacKey raw{};
    for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<std::uint8_t>(17 * i + 3);
    const GmacKey fast(raw), reference(raw, GmacKey::Backend::kOpenSsl);
    CHECK(std::string(fast.backend_name()).starts_with("ipsec-mb"));
    CHECK(std::string(reference.backend_name()) == "openssl");
    std::string data(3 * kMacChunk + 5, '\0');
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 2654435761u) >> 13);
    GmacNonce nonce{};
    for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17},
                             std::size_t{255}, std::size_t{4096 + 7}, kMacChunk, data.size()}) {
        nonce[11] = static_cast<std::uint8_t>(size);
        INFO("bytes " << size);
        CHECK(fast.tag(nonce, data.data(), size) == reference.tag(nonce, data.data(), size));
    }
}
