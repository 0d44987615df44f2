// A model dir every shard really shares (common/shared_dir_check.h): real psd servers answer
// DIRCHECK through their own view of the model dir; two paths on one host stand for two nodes.
#include <catch2/catch.hpp>

#include <filesystem>

#include "common/model_dir_lock.h"
#include "common/shared_dir_check.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::Cluster;
using psrun::test::make_temp_dir;
using psrun::test::small_model;
namespace fs = std::filesystem;

namespace {

psd::ServerOptions with_dir(const std::string& model_dir) {
    psd::ServerOptions o;
    o.num_workers = 1;
    o.worker_timeout = std::chrono::milliseconds(30000);
    o.model_dir = model_dir;
    return o;
}

std::size_t files_in(const std::string& dir) {
    std::size_t n = 0;
    std::error_code ec;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir, ec)) ++n;
    return n;
}

}  // namespace

TEST_CASE("every psd that sees the chief's model dir passes; the proof files are removed", "[psd][dircheck]") {
    const std::string model_dir = make_temp_dir();
    SECTION("psd with the same --model-dir") {
        Cluster cluster(2, with_dir(model_dir));
        PsClient chief(cluster.client_options(0, small_model()));
        REQUIRE(chief.hello());
        REQUIRE(verify_shared_model_dir(chief, model_dir));
        CHECK(files_in(model_dir + "/.psrun/dircheck") == 0);
        CHECK(cluster.exit_code(0, 0.2) == -1);  // still serving
    }
    SECTION("psd without --model-dir: the chief's path is its view") {
        Cluster cluster(1, with_dir(""));
        PsClient chief(cluster.client_options(0, small_model()));
        REQUIRE(chief.hello());
        REQUIRE(verify_shared_model_dir(chief, model_dir));
    }
    fs::remove_all(model_dir);
}

TEST_CASE("a psd that sees another directory stops the job before step 1, naming host, path and fix",
          "[psd][dircheck]") {
    const std::string chief_view = make_temp_dir();
    const std::string other_view = make_temp_dir();  // what a node-local path shows on another node
    Cluster cluster(1, with_dir(other_view));
    PsClient chief(cluster.client_options(0, small_model()));
    REQUIRE(chief.hello());
    auto r = verify_shared_model_dir(chief, chief_view);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
    const std::string& m = r.error().message;
    CHECK_THAT(m, Catch::Contains("ps 0 on host " + this_host() + " does not see the chief's model dir " + chief_view));
    CHECK_THAT(m, Catch::Contains("this psd's model dir is " + other_view));
    CHECK_THAT(m, Catch::Contains("file system every node shares"));
    // The run is stopped: every worker was told (here the chief, the only one), so psd exits 2 (a
    // configuration error) at once, and INIT finds no psd.
    CHECK(cluster.exit_code(0, 15) == kExitUsage);
    const std::size_t n = chief.layout().total;
    std::vector<float> params(n, 0.5f);
    wire::InitConfig init;
    init.optimizer = OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = 0.1f};
    CHECK_FALSE(chief.init(init, params));
    CHECK(files_in(chief_view + "/.psrun/dircheck") == 0);  // the chief cleaned up its proof
    fs::remove_all(chief_view);
    fs::remove_all(other_view);
}

TEST_CASE("DIRCHECK is the chief's, and its body is validated", "[psd][dircheck]") {
    const std::string model_dir = make_temp_dir();
    Cluster cluster(1, with_dir(model_dir));
    auto w0 = cluster.client_options(0, small_model());
    w0.role = wire::Role::kWorker;
    PsClient plain(w0);
    REQUIRE(plain.hello());
    auto r = plain.dir_check(model_dir, "0123456789abcdef0123456789abcdef");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kUnauthorized);
    PsClient chief(cluster.client_options(0, small_model()));
    REQUIRE(chief.hello());
    auto bad = chief.dir_check(model_dir, "not-hex");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().code == ErrorCode::kProtocol);
    CHECK_THAT(bad.error().message, Catch::Contains("nonce"));
    CHECK_FALSE(chief.dir_check("relative/dir", "0123456789abcdef0123456789abcdef"));
    CHECK(cluster.exit_code(0, 0.2) == -1);  // bad requests do not stop the run
    fs::remove_all(model_dir);
}
