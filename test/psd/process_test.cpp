// The real psd binary, started and stopped by PID, with real client processes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/job_keys.h"
#include "psd/shard_state.h"
#include "test/psd/child_process.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::ChildProcess;

namespace {

struct Setup {
    std::string dir = test::make_temp_dir();
    std::filesystem::path psd = test::build_dir() / "psd" / "psd";
    std::filesystem::path client = test::build_dir() / "test" / "psd" / "ps_test_client";
    std::string key = dir + "/.psrun/job.key";
    std::string ep = "ipc://" + dir + "/ps0";
    Setup() { REQUIRE(ensure_job_key_file(key, true, std::chrono::milliseconds(100))); }
    ~Setup() { std::filesystem::remove_all(dir); }
    ChildProcess start_psd(std::vector<std::string> extra) const {
        std::vector<std::string> args = {"--index", "0", "--ps", ep, "--key-file", key};
        args.insert(args.end(), extra.begin(), extra.end());
        return ChildProcess(psd, args, dir + "/psd.log");
    }
    ChildProcess start_client(int index, std::vector<std::string> extra, const std::string& log) const {
        std::vector<std::string> args = {"--ps", ep, "--index", std::to_string(index), "--key-file", key};
        args.insert(args.end(), extra.begin(), extra.end());
        return ChildProcess(client, args, dir + "/" + log);
    }
};

}  // namespace

TEST_CASE("psd process exits 0 once every worker sent DONE", "[psd][process]") {
    Setup s;
    auto psd = s.start_psd({"--num-workers", "2"});
    auto chief = s.start_client(0, {"--steps", "3"}, "c0.log");
    auto worker = s.start_client(1, {"--steps", "2"}, "c1.log");
    CHECK(chief.wait(20) == 0);
    CHECK(worker.wait(20) == 0);
    INFO(psd.output());
    CHECK(psd.wait(10) == 0);
    CHECK_THAT(psd.output(), Catch::Contains("all 2 workers are done"));
}

TEST_CASE("SIGKILLed worker: psd exits 1 after the timeout and --reconnect-wait", "[psd][process]") {
    Setup s;
    auto psd = s.start_psd({"--num-workers", "2", "--worker-timeout", "1", "--reconnect-wait", "2"});
    auto chief = s.start_client(0, {"--steps", "2"}, "c0.log");
    auto victim = s.start_client(1, {"--steps", "1", "--hang"}, "c1.log");
    REQUIRE(victim.wait_for_output("step=", 20));
    CHECK(chief.wait(20) == 0);
    victim.signal(SIGKILL);
    const auto killed = std::chrono::steady_clock::now();
    CHECK(victim.wait(5) == 128 + SIGKILL);
    // Declared dead after 1 s, then kept for 2 s: it might be a worker whose network blinked.
    REQUIRE(psd.wait_for_output("worker 1 silent for more than 1000 ms: declared dead", 10));
    CHECK(psd.wait(1.0) == -1);
    INFO(psd.output());
    CHECK(psd.wait(10) == 1);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
    CHECK(took >= 2.9);
    CHECK(took < 8);
    CHECK_THAT(psd.output(), Catch::Contains("may still come back: waiting up to 2 s after its death") &&
                                 Catch::Contains("worker 1 did not come back within --reconnect-wait 2 s") &&
                                 Catch::Contains("remaining workers are done, but worker 1 died"));
}

TEST_CASE("--reconnect-wait 0: psd exits 1 once the worker is declared dead", "[psd][process]") {
    Setup s;
    auto psd = s.start_psd({"--num-workers", "2", "--worker-timeout", "1", "--reconnect-wait", "0"});
    auto chief = s.start_client(0, {"--steps", "2"}, "c0.log");
    auto victim = s.start_client(1, {"--steps", "1", "--hang"}, "c1.log");
    REQUIRE(victim.wait_for_output("step=", 20));
    CHECK(chief.wait(20) == 0);
    victim.signal(SIGKILL);
    CHECK(victim.wait(5) == 128 + SIGKILL);
    CHECK(psd.wait(0.5) == -1);  // not before the timeout
    INFO(psd.output());
    CHECK(psd.wait(10) == 1);
    CHECK_THAT(psd.output(), Catch::Contains("worker 1 silent for more than 1000 ms: declared dead"));
    CHECK_THAT(psd.output(), !Catch::Contains("may still come back"));
}

TEST_CASE("a worker silent past its timeout that speaks again is taken back", "[psd][process]") {
    Setup s;
    auto psd = s.start_psd({"--num-workers", "2", "--worker-timeout", "1", "--reconnect-wait", "20"});
    auto chief = s.start_client(0, {"--steps", "2"}, "c0.log");
    auto silent = s.start_client(1, {"--steps", "1", "--silent-before-done", "3"}, "c1.log");
    CHECK(chief.wait(20) == 0);
    REQUIRE(psd.wait_for_output("worker 1 silent for more than 1000 ms: declared dead", 10));
    CHECK(silent.wait(20) == 0);
    INFO(psd.output());
    CHECK(psd.wait(10) == 0);
    CHECK_THAT(psd.output(), Catch::Contains("may still come back: waiting up to 20 s") &&
                                 Catch::Contains("worker 1 spoke again") && Catch::Contains("all 2 workers are done"));
}

TEST_CASE("standby psd serves two consecutive runs and saves its shard on SIGTERM", "[psd][process]") {
    Setup s;
    auto psd = s.start_psd({"--num-workers", "1", "--standby", "--model-dir", s.dir});
    const std::string endpoint_file = s.dir + "/ps-0.endpoint";
    auto run1 = s.start_client(0, {"--steps", "3"}, "run1.log");
    CHECK(run1.wait(20) == 0);
    CHECK_THAT(run1.output(), Catch::Contains("step=3 first=0.625000"));
    CHECK(std::filesystem::exists(endpoint_file));
    CHECK(psd.wait(0.3) == -1);  // still serving after the run
    auto run2 = s.start_client(0, {"--steps", "2", "--restored"}, "run2.log");
    CHECK(run2.wait(20) == 0);
    CHECK_THAT(run2.output(), Catch::Contains("step=5 first=0.375000"));
    psd.signal(SIGTERM);
    INFO(psd.output());
    CHECK(psd.wait(10) == 0);
    CHECK_FALSE(std::filesystem::exists(endpoint_file));
    // The saved shard holds run 2's parameters and step.
    const std::vector<TensorSpec> tensors = {{"w", {100, 90}}, {"b", {10}}};
    psd::ShardState shard(*compute_layout(tensors, 1), 0, tensors);
    REQUIRE(shard.load(s.dir + "/ps-0.shard"));
    CHECK(shard.step() == 5);
    CHECK(shard.current().data[0] == 0.375f);
}

TEST_CASE("psd refuses bad flags with exit 2 and a clear message", "[psd][process]") {
    Setup s;
    {
        auto psd =
            ChildProcess(s.psd, {"--index", "3", "--ps", s.ep, "--num-workers", "1", "--no-auth"}, s.dir + "/a.log");
        CHECK(psd.wait(10) == 2);
        CHECK_THAT(psd.output(), Catch::Contains("--index 3 has no endpoint"));
    }
    {
        auto psd = ChildProcess(s.psd, {"--index", "0", "--ps", s.ep, "--num-workers", "1"}, s.dir + "/b.log");
        CHECK(psd.wait(10) == 2);
        CHECK_THAT(psd.output(), Catch::Contains("--no-auth"));
    }
    {
        auto psd =
            ChildProcess(s.psd, {"--index", "0", "--ps", "ipc:///nonexistent-dir/x", "--num-workers", "1", "--no-auth"},
                         s.dir + "/c.log");
        CHECK(psd.wait(10) == 2);
        CHECK_THAT(psd.output(), Catch::Contains("does not exist"));
    }
    {
        auto psd = ChildProcess(
            s.psd, {"--index", "0", "--ps", s.ep, "--num-workers", "1", "--no-auth", "--checkpoint-writer", "disk"},
            s.dir + "/d.log");
        CHECK(psd.wait(10) == 2);
        CHECK_THAT(psd.output(), Catch::Contains("--checkpoint-writer") && Catch::Contains("disk"));
    }
    {
        auto psd = ChildProcess(s.psd,
                                {"--index", "0", "--ps", s.ep, "--num-workers", "1", "--no-auth", "--checkpoint-writer",
                                 "fork", "--checkpoint-in-loop"},
                                s.dir + "/e.log");
        CHECK(psd.wait(10) == 2);
        CHECK_THAT(psd.output(), Catch::Contains("excludes"));
    }
}

// Issue 38: a port in use named neither the endpoint nor the option that set it.
TEST_CASE("psd on a port in use names the endpoint and --ps", "[psd][process]") {
    Setup s;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    const std::string ep = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    auto psd = ChildProcess(s.psd, {"--index", "0", "--ps", ep, "--num-workers", "1", "--no-auth"}, s.dir + "/p.log");
    const int rc = psd.wait(10);
    ::close(fd);
    CHECK(rc == 1);
    CHECK_THAT(psd.output(), Catch::Contains("cannot listen on tcp://" + ep + " (entry 0 of --ps, " + ep + ")") &&
                                 Catch::Contains("Address already in use") && Catch::Contains("--port-base"));
}

TEST_CASE("psrun stop saves and stops a standby psd found through its endpoint file", "[psd][process]") {
    Setup s;
    auto psd = s.start_psd({"--num-workers", "1", "--standby", "--model-dir", s.dir});
    auto run = s.start_client(0, {"--steps", "2"}, "run.log");
    CHECK(run.wait(20) == 0);
    REQUIRE(std::filesystem::exists(s.dir + "/ps-0.endpoint"));
    const auto tool = test::build_dir() / "launcher" / "psrun";
    ChildProcess stop(tool, {"stop", "--model-dir", s.dir, "--timeout", "10"}, s.dir + "/stop.log");
    INFO(stop.output());
    CHECK(stop.wait(20) == 0);
    CHECK_THAT(stop.output(), Catch::Contains("stopped ps-0"));
    CHECK(psd.wait(10) == 0);
    CHECK(std::filesystem::exists(s.dir + "/ps-0.shard"));
    ChildProcess again(tool, {"stop", "--model-dir", s.dir}, s.dir + "/stop2.log");
    CHECK(again.wait(10) == 2);  // nothing left to stop
    CHECK_THAT(again.output(), Catch::Contains("no ps-<i>.endpoint"));
}

TEST_CASE("bench ps runs real psd processes and prints one JSON line", "[psd][process][bench]") {
    Setup s;
    const auto tool = test::build_dir() / "launcher" / "psrun";
    const std::string optimizer = GENERATE(as<std::string>{}, "adam", "lamb");
    INFO(optimizer);
    ChildProcess bench(
        tool,
        {"bench", "ps", "--workers", "2", "--shards", "2", "--rounds", "3", "--warmup", "1", "--optimizer", optimizer},
        s.dir + "/bench.log");
    INFO(bench.output());
    REQUIRE(bench.wait(60) == 0);
    const std::string out = bench.output();  // psd warnings (stderr) may precede the JSON line
    const auto brace = out.rfind("\n{");
    auto j = nlohmann::json::parse(brace == std::string::npos ? out : out.substr(brace + 1));
    CHECK(j["workers"] == 2);
    CHECK(j["shards"] == 2);
    CHECK(j["optimizer"] == optimizer);
    CHECK(j["adam_applied"] == (optimizer == "adam"));
    CHECK(j["optimizer_applied"] == true);
    CHECK(j["optimizer_slots"] == 2);  // Adam's and LAMB's m and v
    CHECK(j["psd_exit_ok"] == true);   // both psds exited 0 after DONE from both workers
    CHECK(j["roundtrip_ms_per_worker"].size() == 2);
    CHECK(j["roundtrip_ms"].get<double>() > 0);
    CHECK(j["psd_peak_rss_mb"][1].get<double>() > 0);
}
