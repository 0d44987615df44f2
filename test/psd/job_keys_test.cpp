#include "common/job_keys.h"

#include <sys/stat.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

using namespace psrun;

namespace {
std::string temp_dir() {
    char tmpl[] = "/tmp/psrun-keys-XXXXXX";
    return mkdtemp(tmpl);
}
}  // namespace

TEST_CASE("key file is created 0600, read back and never overwritten", "[keys]") {
    const std::string dir = temp_dir();
    const std::string path = dir + "/sub/job.key";
    auto created = ensure_job_key_file(path, true, std::chrono::milliseconds(100));
    REQUIRE(created);
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(created->server_public.size() == 40);
    CHECK(created->token != 0);
    auto again = ensure_job_key_file(path, true, std::chrono::milliseconds(100));  // a racing creator
    REQUIRE(again);
    CHECK(again->token == created->token);
    CHECK(again->client_secret == created->client_secret);
    auto reader = ensure_job_key_file(path, false, std::chrono::milliseconds(100));
    REQUIRE(reader);
    CHECK(reader->server_secret == created->server_secret);
    std::filesystem::remove_all(dir);
}

TEST_CASE("key file readers wait for it, and refuse bad permissions or content", "[keys]") {
    const std::string dir = temp_dir();
    const std::string path = dir + "/job.key";
    auto missing = ensure_job_key_file(path, false, std::chrono::milliseconds(100));
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == ErrorCode::kTimeout);

    std::thread writer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        (void)write_job_key_file(path, *generate_job_keys());
    });
    auto waited = ensure_job_key_file(path, false, std::chrono::milliseconds(3000));
    writer.join();
    REQUIRE(waited);

    ::chmod(path.c_str(), 0644);
    auto open_perm = read_job_key_file(path);
    REQUIRE_FALSE(open_perm);
    CHECK(open_perm.error().code == ErrorCode::kUnauthorized);
    CHECK_THAT(open_perm.error().message, Catch::Contains("chmod 600"));

    const std::string bad = dir + "/bad.key";
    for (const char* text :
         {"format=2\n", "format=1\ntoken=xyz\n", "format=1\ntoken=00000000000000ff\nserver_public=short\n"}) {
        std::filesystem::remove(bad);
        { std::ofstream(bad) << text; }
        ::chmod(bad.c_str(), 0600);
        CHECK_FALSE(read_job_key_file(bad));
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("key file text: the token is exactly 16 hex digits, keys hold no NUL", "[keys]") {
    auto keys = generate_job_keys();
    REQUIRE(keys);
    auto text = [&](const std::string& token, const std::string& server_public) {
        return "# comment\nformat=1\ntoken=" + token + "\nserver_public=" + server_public +
               "\nserver_secret=" + keys->server_secret + "\nclient_public=" + keys->client_public +
               "\nclient_secret=" + keys->client_secret;  // no final newline: still a line
    };
    auto good = parse_job_keys(text("00000000000000ff", keys->server_public), "k");
    REQUIRE(good);
    CHECK(good->token == 0xff);
    CHECK(good->client_secret == keys->client_secret);
    // strtoull would take these: a sign, leading blanks, a 0x prefix.
    for (const char* token : {"-000000000000001", " 00000000000001f", "+00000000000001f", "0x0000000000001f",
                              "0000000000000000", "00000000000000fg"}) {
        auto bad = parse_job_keys(text(token, keys->server_public), "k");
        INFO(token);
        REQUIRE_FALSE(bad);
        CHECK_THAT(bad.error().message, Catch::Contains("k: bad token"));
    }
    std::string nul_key = keys->server_public;
    nul_key[35] = '\0';  // zmq_z85_decode would stop there and decode 28 bytes
    auto bad = parse_job_keys(text("00000000000000ff", nul_key), "k");
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("malformed CURVE key"));
}
