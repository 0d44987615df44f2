// psd's lifecycle and its guards behind real ZeroMQ sockets: PULL before INIT, another model's
// worker, bad gradients and tokens, DONE and silent workers, CURVE and ipc keys, ERROR replies
// of several shards, standby for a next run.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cmath>
#include <limits>

#include "common/zmq_util.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::base_options;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::sgd;
using psrun::test::small_model;

TEST_CASE("PULL waits for the chief's INIT, then times out naming missing ranks", "[psd]") {
    auto o = base_options(3);
    o.init_timeout = std::chrono::milliseconds(400);
    Cluster cluster(1, o);
    PsClient w1(cluster.client_options(1, small_model()));
    REQUIRE(w1.hello());
    const std::size_t n = w1.layout().total;
    std::vector<float> out(n);
    auto timed_out = w1.pull(out);
    REQUIRE_FALSE(timed_out);
    CHECK(timed_out.error().code == ErrorCode::kTimeout);
    CHECK_THAT(timed_out.error().message, Catch::Contains("never said HELLO: 0, 2"));

    PsClient chief(cluster.client_options(0, small_model()));
    REQUIRE(chief.hello());
    auto waiting = std::async(std::launch::async, [&] { return w1.pull(out); });
    CHECK(waiting.wait_for(std::chrono::milliseconds(150)) == std::future_status::timeout);
    auto params = ramp(n, 3.0f);
    REQUIRE(chief.init(sgd(0.1f), params));
    REQUIRE(waiting.get());
    CHECK(out == params);
}

TEST_CASE("a worker of another model is refused at HELLO, naming both models", "[psd]") {
    Cluster cluster(1, base_options(3));
    auto chief_options = cluster.client_options(0, small_model());
    chief_options.model = {"mlp_a", std::string(64, 'a')};
    PsClient chief(chief_options);
    REQUIRE(chief.hello());
    // Same tensor list, another architecture (e.g. tanh instead of relu): refused by the hash.
    auto other_options = cluster.client_options(1, small_model());
    other_options.model = {"mlp_b", std::string(64, 'b')};
    PsClient other(other_options);
    auto refused = other.hello();
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(refused.error().message,
               Catch::Contains("serves model 'mlp_a' (architecture aaaaaaaaaaaa)") &&
                   Catch::Contains("worker 1 trains model 'mlp_b' (architecture bbbbbbbbbbbb)") &&
                   Catch::Contains("same --model"));
    // The same model joins; a client that names no hash is judged by the tensor list alone.
    auto same_options = cluster.client_options(2, small_model());
    same_options.model = chief_options.model;
    PsClient same(same_options);
    CHECK(same.hello());
    PsClient unhashed(cluster.client_options(1, small_model()));
    CHECK(unhashed.hello());
}

TEST_CASE("bad gradients, tokens and indices get ERROR replies and psd goes on", "[psd]") {
    Cluster cluster(1, base_options(2));
    PsClient chief(cluster.client_options(0, small_model()));
    REQUIRE(chief.hello());
    const std::size_t n = chief.layout().total;
    auto params = ramp(n, 1.0f);
    REQUIRE(chief.init(sgd(0.1f, 3), params));
    std::vector<float> out(n);
    auto g = ramp(n, 1.0f);
    g[n - 1] = std::numeric_limits<float>::quiet_NaN();
    auto nan = chief.push_pull(g, 0, out);
    REQUIRE_FALSE(nan);
    CHECK_THAT(nan.error().message, Catch::Contains("NaN or Inf"));
    REQUIRE(chief.pull(out));
    CHECK(out == params);  // weights untouched

    auto bad_token = cluster.client_options(1, small_model());
    bad_token.token = 99;
    PsClient intruder(bad_token);
    auto refused = intruder.hello();
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::kUnauthorized);

    PsClient out_of_range(cluster.client_options(7, small_model()));
    auto bad_index = out_of_range.hello();
    REQUIRE_FALSE(bad_index);
    CHECK_THAT(bad_index.error().message, Catch::Contains("not below --num-workers"));

    PsClient other_model(cluster.client_options(1, {{"x", {3}}}));
    CHECK_FALSE(other_model.hello());

    // last_step = 3: further pushes are not applied (no overshoot) and report "finished".
    g = ramp(n, 1.0f);
    for (std::uint64_t s = 0; s < 5; ++s) REQUIRE(chief.push_pull(g, s, out));
    auto last = chief.push_pull(g, 5, out);
    REQUIRE(last);
    CHECK(last->step == 3);
    CHECK(last->finished);
    auto stats = chief.stats(0);
    REQUIRE(stats);
    CHECK((*stats)["nonfinite"] == 1);
    CHECK((*stats)["unauthorized"] == 1);
    CHECK((*stats)["applied"] == 3);
}

TEST_CASE("DONE from every worker ends the run with exit 0; a silent worker makes it 1", "[psd]") {
    {
        Cluster cluster(2, base_options(2));
        PsClient chief(cluster.client_options(0, small_model()));
        PsClient worker(cluster.client_options(1, small_model()));
        REQUIRE(chief.hello());
        REQUIRE(worker.hello());
        REQUIRE(chief.done());
        CHECK(cluster.exit_code(0, 0.3) == -1);  // still serving worker 1
        REQUIRE(worker.done());
        CHECK(cluster.exit_code(0, 5) == 0);
        CHECK(cluster.exit_code(1, 5) == 0);
    }
    {
        auto o = base_options(2);
        o.worker_timeout = std::chrono::milliseconds(300);
        Cluster cluster(1, o);
        PsClient chief(cluster.client_options(0, small_model()));
        PsClient worker(cluster.client_options(1, small_model()));
        REQUIRE(chief.hello());
        REQUIRE(worker.hello());  // then silent
        REQUIRE(chief.done());
        CHECK(cluster.exit_code(0, 5) == 1);
    }
    {
        auto o = base_options(2);
        o.init_timeout = std::chrono::milliseconds(400);
        Cluster cluster(1, o);
        PsClient chief(cluster.client_options(0, small_model()));
        REQUIRE(chief.hello());
        REQUIRE(chief.done());
        CHECK(cluster.exit_code(0, 0.2) == -1);  // worker 1 may still come
        CHECK(cluster.exit_code(0, 5) == 1);     // it never did: psd does not wait forever
    }
}

TEST_CASE("CURVE on tcp: the job's key is admitted, another key is refused", "[psd][auth]") {
    auto keys = generate_job_keys();
    REQUIRE(keys);
    auto o = base_options(1);
    o.keys = *keys;
    o.auth = AuthMode::kCurve;
    Cluster cluster(1, o, "tcp");
    CHECK(uses_curve(cluster.endpoints()[0]));
    auto good = cluster.client_options(0, small_model());
    good.keys = *keys;
    good.auth = AuthMode::kCurve;
    PsClient chief(good);
    REQUIRE(chief.hello());

    auto other = generate_job_keys();
    REQUIRE(other);
    auto bad = good;
    bad.keys = *other;
    bad.keys->server_public = keys->server_public;  // knows the server, but not the client key
    bad.connect_timeout = std::chrono::milliseconds(700);
    PsClient intruder(bad);
    auto refused = intruder.hello();
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::kTimeout);
    auto stats = chief.stats(0);
    REQUIRE(stats);
    CHECK((*stats)["auth_denied"].get<int>() >= 1);

    auto no_curve = good;
    no_curve.keys.reset();
    no_curve.token = keys->token;
    no_curve.connect_timeout = std::chrono::milliseconds(500);
    PsClient plain(no_curve);
    CHECK_FALSE(plain.hello());
}

TEST_CASE("ipc with a key file: owner-only socket file and the job token", "[psd][auth]") {
    auto keys = generate_job_keys();
    REQUIRE(keys);
    auto o = base_options(1);
    o.keys = *keys;
    Cluster cluster(1, o);
    const std::string path = cluster.endpoints()[0].substr(6);
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK(S_ISSOCK(st.st_mode));
    CHECK((st.st_mode & 0777) == 0600);
    auto good = cluster.client_options(0, small_model());
    good.keys = *keys;
    PsClient chief(good);
    REQUIRE(chief.hello());
    auto other = generate_job_keys();
    auto bad = good;
    bad.keys = *other;  // another job's key file: another token
    PsClient intruder(bad);
    auto refused = intruder.hello();
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::kUnauthorized);
}

TEST_CASE("ERROR replies from several shards leave no reply queued behind", "[psd]") {
    Cluster cluster(2, base_options(1));
    PsClient chief(cluster.client_options(0, mnist_deep_tensors()));
    REQUIRE(chief.hello());
    const std::size_t n = chief.layout().total;
    auto params = ramp(n, 1.0f);
    REQUIRE(chief.init(sgd(0.5f), params));
    auto g = ramp(n, 0.25f);
    g.front() = std::numeric_limits<float>::infinity();  // in shard 0
    g.back() = std::numeric_limits<float>::quiet_NaN();  // in shard 1
    std::vector<float> out(n);
    REQUIRE_FALSE(chief.push_pull(g, 0, out));
    g.front() = g.back() = 0.25f;
    auto ok = chief.push_pull(g, 0, out);
    REQUIRE(ok);
    CHECK(ok->step == 1);
    for (std::size_t i = 0; i < n; i += 997) REQUIRE(out[i] == params[i] - 0.5f * g[i]);
}

TEST_CASE("standby: a new run's workers wait for its chief's INIT instead of finishing at once", "[psd][standby]") {
    auto o = base_options(2);
    o.standby = true;
    o.model_dir = psrun::test::make_temp_dir();
    {
        Cluster cluster(1, o);
        std::size_t n = 0;
        {  // run 1: one step, to its last step 1; both workers DONE
            PsClient chief(cluster.client_options(0, small_model()));
            PsClient w1(cluster.client_options(1, small_model()));
            REQUIRE(chief.hello());
            REQUIRE(w1.hello());
            n = chief.layout().total;
            REQUIRE(chief.init(sgd(0.1f, 1), ramp(n, 1.0f)));
            std::vector<float> out(n);
            auto s = chief.push_pull(ramp(n, 0.5f), 0, out);
            REQUIRE(s);
            CHECK(s->finished);
            REQUIRE(chief.done());
            REQUIRE(w1.done());
        }
        // Run 2: its worker 1 comes first. psd still holds run 1's (finished) parameters, but worker 1 must
        // not take them for its own run: it is told "not initialized" and its PULL waits for the chief.
        PsClient w1(cluster.client_options(1, small_model()));
        REQUIRE(w1.hello());
        CHECK_FALSE(w1.servers_initialized());
        auto stats = w1.stats(0);
        REQUIRE(stats);
        CHECK((*stats)["initialized"] == false);
        std::vector<float> out(n), chief_out(n);
        auto waiting = std::async(std::launch::async, [&] { return w1.pull(out); });
        CHECK(waiting.wait_for(std::chrono::milliseconds(150)) == std::future_status::timeout);
        PsClient chief(cluster.client_options(0, small_model()));
        REQUIRE(chief.hello());
        CHECK(chief.servers_initialized());  // the chief continues from the kept parameters
        REQUIRE(chief.init_restored(sgd(0.1f, 3)));
        auto pulled = waiting.get();
        REQUIRE(pulled);
        CHECK(pulled->step == 1);
        CHECK_FALSE(pulled->finished);
        auto s = w1.push_pull(ramp(n, 0.5f), 1, out);
        REQUIRE(s);
        CHECK(s->step == 2);
        CHECK_FALSE(s->finished);
        REQUIRE(chief.pull(chief_out));
        CHECK(chief_out == out);
    }
    std::filesystem::remove_all(o.model_dir);
}
