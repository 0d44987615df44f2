#include "launcher/daemon_command.h"

#include <catch2/catch.hpp>

#include <algorithm>

#include "launcher/map_builder.h"

using namespace psrun;
using namespace psrun::launcher;

using Args = std::vector<std::string>;

namespace {

ClusterMap two_ps_three_workers() {
    auto m = local_map(2, 3, 1, {"n1:20000", "n2:20000", "n1:20001", "n2:20001", "n1:20002", "n2:20002"});
    m->threads = 4;
    return *m;
}

}  // namespace

TEST_CASE("psd gets index, every ps endpoint and the worker count", "[daemon]") {
    DaemonOptions o;
    o.training = {"--data-dir", "/d", "--model-dir", "/m", "--steps", "10"};
    o.key_file = "/k";
    const auto cmd = daemon_command(two_ps_three_workers(), Role::kPs, 1, o);
    REQUIRE(cmd);
    CHECK(cmd->program == "psd");
    CHECK(cmd->label == "ps 1");
    CHECK(cmd->argv == Args{"psd", "--index", "1", "--ps", "tcp://n1:20000,tcp://n2:20000", "--num-workers", "3",
                            "--model-dir", "/m", "--key-file", "/k", "--threads", "4"});
}

TEST_CASE("psd forwards sync, standby, timeout and log level", "[daemon]") {
    DaemonOptions o;
    o.no_auth = true;
    o.sync = true;
    o.backup_workers = 1;
    o.standby = true;
    o.worker_timeout = 30;
    o.log_level = "debug";
    o.training = {"--model-dir=/m2"};
    auto map = two_ps_three_workers();
    map.threads.reset();
    const auto cmd = daemon_command(map, Role::kPs, 0, o);
    REQUIRE(cmd);
    CHECK(cmd->argv == Args{"psd",
                            "--index",
                            "0",
                            "--ps",
                            "tcp://n1:20000,tcp://n2:20000",
                            "--num-workers",
                            "3",
                            "--model-dir",
                            "/m2",
                            "--no-auth",
                            "--standby",
                            "--worker-timeout",
                            "30",
                            "--sync",
                            "--replicas-to-aggregate",
                            "3",
                            "--backup-workers",
                            "1",
                            "--log-level",
                            "debug"});
}

TEST_CASE("workerd gets chief, evaluator and training options", "[daemon]") {
    DaemonOptions o;
    o.training = {"--steps", "5"};
    const auto map = two_ps_three_workers();
    const auto chief = daemon_command(map, Role::kWorker, 0, o);
    REQUIRE(chief);
    CHECK(chief->argv == Args{"workerd", "--index", "0", "--ps", "tcp://n1:20000,tcp://n2:20000", "--num-workers", "3",
                              "--chief", "--threads", "4", "--steps", "5"});
    const auto w2 = daemon_command(map, Role::kWorker, 2, o);
    CHECK(w2->argv == Args{"workerd", "--index", "2", "--ps", "tcp://n1:20000,tcp://n2:20000", "--num-workers", "3",
                           "--threads", "4", "--steps", "5"});
    const auto eval = daemon_command(map, Role::kEvaluator, 0, o);
    CHECK(eval->argv == Args{"workerd", "--index", "0", "--ps", "tcp://n1:20000,tcp://n2:20000", "--num-workers", "3",
                             "--evaluator", "--threads", "4", "--steps", "5"});
}

TEST_CASE("no ps and one worker runs standalone; more workers need a ps", "[daemon]") {
    DaemonOptions o;
    o.training = {"--steps", "5"};
    const auto solo = daemon_command(*local_map(0, 1, 0, {"127.0.0.1:1"}), Role::kWorker, 0, o);
    REQUIRE(solo);
    CHECK(solo->argv == Args{"workerd", "--standalone", "--steps", "5"});
    const auto two = daemon_command(*local_map(0, 2, 0, {"a:1", "a:2"}), Role::kWorker, 0, o);
    REQUIRE_FALSE(two);
    CHECK_THAT(two.error().message, Catch::Contains("--ps 1"));
}

TEST_CASE("ipc endpoints are passed unchanged", "[daemon]") {
    const auto map = local_map(1, 1, 0, {"ipc:///tmp/x/ps-0", "ipc:///tmp/x/worker-0"});
    const auto cmd = daemon_command(*map, Role::kWorker, 0, DaemonOptions{});
    CHECK(cmd->argv == Args{"workerd", "--index", "0", "--ps", "ipc:///tmp/x/ps-0", "--num-workers", "1", "--chief"});
}

TEST_CASE("daemon_path honours --bin-dir, then PSRUN_BIN_DIR, and explains a missing binary", "[daemon]") {
    DaemonOptions o;
    o.bin_dir = "/bin";
    CHECK(*daemon_path("sh", o, EnvMap{}) == "/bin/sh");
    CHECK(*daemon_path("sh", DaemonOptions{}, EnvMap{{"PSRUN_BIN_DIR", "/bin"}}) == "/bin/sh");
    o.bin_dir = "/nonexistent-dir";
    const auto missing = daemon_path("psd", o, EnvMap{});
    REQUIRE_FALSE(missing);
    CHECK_THAT(missing.error().message, Catch::Contains("/nonexistent-dir/psd") && Catch::Contains("--bin-dir"));
}

TEST_CASE("--max-bad-grads goes to psd and --reconnect-wait to psd and the workers, not the evaluator", "[daemon]") {
    DaemonOptions o;
    o.no_auth = true;
    o.max_bad_grads = 5;
    o.reconnect_wait = 90;
    const auto map = two_ps_three_workers();
    const auto ps = daemon_command(map, Role::kPs, 0, o);
    REQUIRE(ps);
    CHECK(ps->argv == Args{"psd", "--index", "0", "--ps", "tcp://n1:20000,tcp://n2:20000", "--num-workers", "3",
                           "--no-auth", "--max-bad-grads", "5", "--reconnect-wait", "90", "--threads", "4"});
    const auto worker = daemon_command(map, Role::kWorker, 1, o);
    REQUIRE(worker);
    CHECK(worker->argv == Args{"workerd", "--index", "1", "--ps", "tcp://n1:20000,tcp://n2:20000", "--num-workers", "3",
                               "--no-auth", "--reconnect-wait", "90", "--threads", "4"});
    const auto evaluator = daemon_command(map, Role::kEvaluator, 0, o);
    REQUIRE(evaluator);
    CHECK(std::find(evaluator->argv.begin(), evaluator->argv.end(), "--reconnect-wait") == evaluator->argv.end());
    // Not given: the daemons' own default (kDefaultReconnectWait), nothing on the command line.
    o.reconnect_wait.reset();
    const auto plain = daemon_command(map, Role::kWorker, 1, o);
    REQUIRE(plain);
    CHECK(std::find(plain->argv.begin(), plain->argv.end(), "--reconnect-wait") == plain->argv.end());
}

TEST_CASE("--min-workers goes to psd only (elastic membership)", "[daemon]") {
    DaemonOptions o;
    o.no_auth = true;
    o.min_workers = 2;
    const auto map = two_ps_three_workers();
    const auto ps = daemon_command(map, Role::kPs, 1, o);
    REQUIRE(ps);
    CHECK(ps->argv == Args{"psd", "--index", "1", "--ps", "tcp://n1:20000,tcp://n2:20000", "--num-workers", "3",
                           "--no-auth", "--min-workers", "2", "--threads", "4"});
    const auto worker = daemon_command(map, Role::kWorker, 2, o);
    REQUIRE(worker);
    CHECK(std::find(worker->argv.begin(), worker->argv.end(), "--min-workers") == worker->argv.end());
}

TEST_CASE("--checkpoint-writer goes to psd only", "[daemon]") {
    DaemonOptions o;
    o.no_auth = true;
    o.checkpoint_writer = "fork";
    const auto map = two_ps_three_workers();
    const auto ps = daemon_command(map, Role::kPs, 0, o);
    REQUIRE(ps);
    CHECK(ps->argv == Args{"psd", "--index", "0", "--ps", "tcp://n1:20000,tcp://n2:20000", "--num-workers", "3",
                           "--no-auth", "--checkpoint-writer", "fork", "--threads", "4"});
    const auto worker = daemon_command(map, Role::kWorker, 0, o);
    REQUIRE(worker);
    CHECK(std::find(worker->argv.begin(), worker->argv.end(), "--checkpoint-writer") == worker->argv.end());
}

TEST_CASE("ps_threads replaces map.threads for psd only", "[daemon]") {
    DaemonOptions o;
    o.no_auth = true;
    o.ps_threads = 1;
    const ClusterMap map = two_ps_three_workers();  // map.threads 4
    const auto ps = daemon_command(map, Role::kPs, 0, o);
    REQUIRE(ps);
    CHECK(Args(ps->argv.end() - 2, ps->argv.end()) == Args{"--threads", "1"});
    for (Role role : {Role::kWorker, Role::kEvaluator}) {
        const auto w = daemon_command(map, role, 0, o);
        REQUIRE(w);
        CHECK(Args(w->argv.end() - 2, w->argv.end()) == Args{"--threads", "4"});
    }
}

TEST_CASE("training_threads finds workerd's last --threads among the training options", "[daemon]") {
    CHECK_FALSE(training_threads({"--steps", "5"}));
    CHECK(training_threads({"--threads", "2", "--steps", "5"}) == 2);
    CHECK(training_threads({"--threads", "2", "--threads=3"}) == 3);
    CHECK_FALSE(training_threads({"--threads", "x"}));
    CHECK_FALSE(training_threads({"--threads"}));
}

TEST_CASE("psd gets the workers' --signal-grace: one drain budget (common/drain_budget.h)", "[daemon]") {
    DaemonOptions o;
    o.no_auth = true;
    o.training = {"--model-dir", "/m", "--signal-grace", "12"};
    const auto ps = daemon_command(two_ps_three_workers(), Role::kPs, 0, o);
    REQUIRE(ps);
    const auto at = std::find(ps->argv.begin(), ps->argv.end(), "--signal-grace");
    REQUIRE(at != ps->argv.end());
    CHECK(*(at + 1) == "12");
    o.training = {"--signal-grace=3.5"};
    const auto eq = daemon_command(two_ps_three_workers(), Role::kPs, 0, o);
    REQUIRE(eq);
    CHECK(std::count(eq->argv.begin(), eq->argv.end(), "3.5") == 1);
    o.training = {"--steps", "5"};  // not given: psd keeps its default, which is the workers' too
    const auto none = daemon_command(two_ps_three_workers(), Role::kPs, 0, o);
    REQUIRE(none);
    CHECK(std::find(none->argv.begin(), none->argv.end(), "--signal-grace") == none->argv.end());
    CHECK(training_value({"--signal-grace", "4", "--signal-grace=6"}, "--signal-grace") == "6");
}
