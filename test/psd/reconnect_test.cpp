// A lost psd that answers again (common/ps_client_reconnect.cpp, docs/reliability.md "A network
// that blinks"): the same psd process is reconnected to and the request in flight goes on; a
// restarted one is reported; nobody within --reconnect-wait fails the request naming the wait.
// A stopped psd (SIGSTOP) stands for one behind a dead link: the client sees the same thing, no
// heartbeat answers on a connection that stays open. The real link flaps run on the Slurm lab
// (test/slurm/link_flap_test.sh).
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <future>
#include <thread>

#include "common/job_keys.h"
#include "test/psd/child_process.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using namespace psrun::test;
using namespace std::chrono_literals;

namespace {

struct RealPsd {
    std::string dir = make_temp_dir();
    std::string key = dir + "/.psrun/job.key";
    std::string ep = "ipc://" + dir + "/ps0";
    RealPsd() { REQUIRE(ensure_job_key_file(key, true, std::chrono::milliseconds(100))); }
    ~RealPsd() { std::filesystem::remove_all(dir); }
    ChildProcess start(const std::string& log) const {
        return ChildProcess(build_dir() / "psd" / "psd",
                            {"--index", "0", "--ps", ep, "--key-file", key, "--num-workers", "1"}, dir + "/" + log);
    }
    PsClientOptions chief(std::chrono::milliseconds reconnect_wait) const {
        PsClientOptions o;
        o.endpoints = {ep};
        o.index = 0;
        o.role = wire::Role::kChief;
        o.tensors = small_model();
        auto keys = read_job_key_file(key);
        REQUIRE(keys);
        o.keys = *keys;
        o.connect_timeout = 5s;
        o.reply_timeout = 20s;
        o.heartbeat_timeout = 1s;
        o.reconnect_wait = reconnect_wait;
        return o;
    }
};

// The heartbeat probe starts its ZMTP handshake a little after the data socket: a psd stopped before
// it completed would go unnoticed (a probe only watches a psd it once reached).
void let_probe_connect() { std::this_thread::sleep_for(300ms); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("reconnect: a SAVE in flight is sent again to the same psd", "[psd][process][reconnect]") {
    RealPsd s;
    auto psd = s.start("psd.log");
    PsClient chief(s.chief(20s));
    REQUIRE(chief.hello());
    const std::size_t n = chief.layout().total;
    REQUIRE(chief.init(sgd(0.5f), ramp(n, 1.0f)));
    std::vector<float> out(n);
    REQUIRE(chief.push_pull(ramp(n, 0.2f), 0, out));
    const std::string ckpt = s.dir + "/ckpt";
    std::filesystem::create_directories(ckpt);
    let_probe_connect();
    psd.signal(SIGSTOP);  // the SAVE below is queued; no heartbeat is answered
    const auto t0 = std::chrono::steady_clock::now();
    auto saved = std::async(std::launch::async, [&] { return chief.save(1, ckpt); });
    CHECK(saved.wait_for(4s) ==
          std::future_status::timeout);  // lost after 1 s (+1 s for a late reply), then waited for
    psd.signal(SIGCONT);
    REQUIRE(saved.wait_for(15s) == std::future_status::ready);
    const auto result = saved.get();
    INFO((result ? std::string("ok") : result.error().message));
    REQUIRE(result);
    CHECK(seconds_since(t0) >= 4.0);
    INFO(psd.output());
    CHECK(chief.reconnects() == 1);
    CHECK_FALSE(chief.restarted_shard());
    CHECK_FALSE(chief.lost_shard());
    CHECK(std::filesystem::exists(ckpt + "/ps-0-of-1.tensors"));
    // The same psd, parameters intact: training goes on from step 1.
    auto next = chief.push_pull(ramp(n, 0.2f), 1, out);
    REQUIRE(next);
    CHECK(next->step == 2);
    CHECK_FALSE(next->reconnected);
    REQUIRE(chief.done());
    INFO(psd.output());
    CHECK(psd.wait(10) == 0);
}

TEST_CASE("reconnect: an exchange in flight becomes a PULL", "[psd][process][reconnect]") {
    RealPsd s;
    auto psd = s.start("psd.log");
    PsClient chief(s.chief(20s));
    REQUIRE(chief.hello());
    const std::size_t n = chief.layout().total;
    const auto params = ramp(n, 1.0f), g = ramp(n, 0.2f);
    REQUIRE(chief.init(sgd(0.5f), params));
    std::vector<float> out(n);
    let_probe_connect();
    psd.signal(SIGSTOP);
    auto step = std::async(std::launch::async, [&] { return chief.push_pull(g, 0, out); });
    CHECK(step.wait_for(4s) == std::future_status::timeout);  // lost after 1 s (+1 s for a late reply), then waited for
    psd.signal(SIGCONT);
    REQUIRE(step.wait_for(15s) == std::future_status::ready);
    const auto info = step.get();
    REQUIRE(info);
    CHECK(info->reconnected);
    // The stopped psd still read the first PUSH_PULL from its socket when it resumed, or never got it:
    // either way the gradient counts at most once.
    CHECK(info->step <= 1);
    CHECK(out[5] == Approx(info->step == 1 ? params[5] - 0.5f * g[5] : params[5]));
    REQUIRE(chief.done());
    CHECK(psd.wait(10) == 0);
}

TEST_CASE("reconnect: a restarted psd is reported as restarted", "[psd][process][reconnect]") {
    RealPsd s;
    auto psd = s.start("psd.log");
    PsClient chief(s.chief(20s));
    REQUIRE(chief.hello());
    REQUIRE(chief.init(sgd(0.5f), ramp(chief.layout().total, 1.0f)));
    psd.signal(SIGKILL);
    CHECK(psd.wait(5) == 128 + SIGKILL);
    std::this_thread::sleep_for(200ms);  // the dropped connection is reported
    auto again = s.start("psd-again.log");
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> out(chief.layout().total);
    auto r = chief.push_pull(ramp(out.size(), 0.1f), 0, out);
    REQUIRE_FALSE(r);
    CHECK(seconds_since(t0) < 10);
    CHECK_THAT(r.error().message, Catch::Contains("restarted (another psd process answers on its endpoint)"));
    CHECK(chief.restarted_shard() == std::optional<std::uint32_t>(0));
    CHECK(chief.lost_shard() == std::optional<std::uint32_t>(0));
    CHECK(chief.reconnects() == 0);
    again.signal(SIGTERM);
    CHECK(again.wait(15) >= 0);
}

TEST_CASE("reconnect: no psd within the wait fails the request", "[psd][process][reconnect]") {
    RealPsd s;
    auto psd = s.start("psd.log");
    PsClient chief(s.chief(2s));
    REQUIRE(chief.hello());
    psd.signal(SIGKILL);
    CHECK(psd.wait(5) == 128 + SIGKILL);
    const auto t0 = std::chrono::steady_clock::now();
    auto r = chief.stats(0);
    REQUIRE_FALSE(r);
    const double took = seconds_since(t0);
    CHECK(took >= 2.0);
    CHECK(took < 8.0);
    CHECK_THAT(r.error().message, Catch::Contains("ps 0 (" + s.ep + ") did not answer for") &&
                                      Catch::Contains("--reconnect-wait 2 s): giving up"));
    CHECK(chief.lost_shard() == std::optional<std::uint32_t>(0));
    auto later = chief.stats(0);  // every later request fails at once, with the same reason
    REQUIRE_FALSE(later);
    CHECK_THAT(later.error().message, Catch::Contains("giving up"));
}

TEST_CASE("reconnect: sync, a worker back mid-step waits, counted once", "[psd][reconnect]") {
    auto o = base_options(2);
    o.sync = true;
    o.replicas_to_aggregate = 2;
    Cluster cluster(1, o);
    PsClient chief(cluster.client_options(0, small_model()));
    PsClient worker(cluster.client_options(1, small_model()));
    REQUIRE(chief.hello());
    REQUIRE(worker.hello());
    const std::size_t n = chief.layout().total;
    const auto params = ramp(n, 1.0f), g0 = ramp(n, 0.2f), g1 = ramp(n, 0.6f);
    REQUIRE(chief.init(sgd(0.5f), params));
    std::vector<float> a(n), b(n), c(n), d(n);
    // Worker 1's gradient for step 0 is in; then its connection is given up (a blink): the same worker
    // comes back on new connections with a PULL (the client's stand-in) and with the gradient again.
    auto first = std::async(std::launch::async, [&] { return worker.push_pull(g1, 0, a); });
    std::this_thread::sleep_for(300ms);
    PsClient again(cluster.client_options(1, small_model()));
    REQUIRE(again.hello());
    auto pulled = std::async(std::launch::async, [&] { return again.pull(b); });
    PsClient resent(cluster.client_options(1, small_model()));
    REQUIRE(resent.hello());
    auto pushed = std::async(std::launch::async, [&] { return resent.push_pull(g1, 0, c); });
    CHECK(pulled.wait_for(500ms) == std::future_status::timeout);  // held until the step completes
    CHECK(pushed.wait_for(10ms) == std::future_status::timeout);   // not refused: held as well
    auto step = chief.push_pull(g0, 0, d);
    REQUIRE(step);
    CHECK(step->step == 1);
    for (auto* f : {&first, &pulled, &pushed}) {
        REQUIRE(f->wait_for(5s) == std::future_status::ready);
        auto r = f->get();
        REQUIRE(r);
        CHECK(r->step == 1);
    }
    // Two gradients averaged, worker 1's once.
    CHECK(d[5] == Approx(params[5] - 0.5f * (g0[5] + g1[5]) / 2));
    CHECK(b[5] == Approx(d[5]));
    CHECK(c[5] == Approx(d[5]));
}
