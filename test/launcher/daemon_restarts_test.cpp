// launcher/daemon_restarts.h: which deaths psrun local answers with a restart (--restart-workers,
// --restart-ps, each with its own budget), the summary.json form of the records, and the closing
// summary's line per restart (launcher/run_summary.h), old worker-only records included.
#include "launcher/daemon_restarts.h"

#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <algorithm>

#include "launcher/run_summary.h"

using namespace psrun::launcher;

namespace {

// Wait statuses as waitpid reports them.
constexpr int kKilled = SIGKILL;            // WIFSIGNALED, WTERMSIG == SIGKILL
int exited(int code) { return code << 8; }  // WIFEXITED, WEXITSTATUS == code

// No --ps endpoints: record() asks no psd for the global step.
DaemonCommand command_of(const std::string& program, int index, std::vector<std::string> extra = {}) {
    DaemonCommand c;
    c.program = program;
    c.label = (program == "psd" ? "ps " : "worker ") + std::to_string(index);
    c.argv = {program, "--index", std::to_string(index)};
    c.argv.insert(c.argv.end(), extra.begin(), extra.end());
    return c;
}

}  // namespace

TEST_CASE("DaemonRestarts: a worker and a psd each have their own budget", "[restarts]") {
    REQUIRE(WIFSIGNALED(kKilled));
    REQUIRE(WEXITSTATUS(exited(1)) == 1);
    DaemonRestarts r(1, 2);
    const auto ps1 = command_of("psd", 1);
    const auto w2 = command_of("workerd", 2);
    CHECK(r.may_restart(ps1, kKilled));
    CHECK(r.may_restart(ps1, exited(1)));
    for (int code : {0, 2, 75, 74}) CHECK_FALSE(r.may_restart(ps1, exited(code)));
    CHECK_FALSE(r.may_restart(command_of("workerd", 0, {"--evaluator"}), kKilled));
    CHECK_FALSE(r.may_restart(command_of("workerd", 0, {"--standalone"}), kKilled));
    CHECK(std::string(DaemonRestarts::option(ps1)) == "--restart-ps");
    CHECK(std::string(DaemonRestarts::option(w2)) == "--restart-workers");

    const DaemonRestart& first = r.record(ps1, kKilled);
    CHECK(first.role == "ps");
    CHECK(first.label == "ps 1");
    CHECK(first.index == 1);
    CHECK(first.status == "was killed by Killed");
    CHECK_FALSE(first.global_step.has_value());
    CHECK(r.used(ps1) == 1);
    CHECK(r.used(w2) == 0);
    CHECK(r.may_restart(ps1, kKilled));  // 1 of 2
    r.record(w2, exited(1));
    CHECK_FALSE(r.may_restart(w2, kKilled));  // the worker's 1 is used up
    r.record(command_of("psd", 0), kKilled);
    CHECK_FALSE(r.may_restart(ps1, kKilled));  // 2 of 2
    CHECK(r.max(ps1) == 2);
    CHECK(r.max(w2) == 1);

    const auto j = r.to_json();
    REQUIRE(j.size() == 3);
    CHECK(j[0]["role"] == "ps");
    CHECK(j[0]["ps"] == 1);
    CHECK(j[0]["global_step"].is_null());
    CHECK(j[1]["role"] == "worker");
    CHECK(j[1]["worker"] == 2);  // the key --restart-workers' records always had
    CHECK(j[1]["status"] == "exited with status 1");
    CHECK(j[2]["ps"] == 0);
}

TEST_CASE("DaemonRestarts: no restarts without a budget", "[restarts]") {
    DaemonRestarts r(0, 0);
    CHECK_FALSE(r.may_restart(command_of("psd", 0), kKilled));
    CHECK_FALSE(r.may_restart(command_of("workerd", 1), kKilled));
}

TEST_CASE("summary_lines names each restart by role; records without a role are workers", "[restarts][summary]") {
    nlohmann::json s = {{"global_step", 6000}, {"test_accuracy", 0.9671}, {"dataset", "mnist"}};
    s["restarts"] = {{{"role", "ps"},
                      {"ps", 1},
                      {"time", "2026-11-28T21:11:32Z"},
                      {"status", "was killed by Killed"},
                      {"global_step", 953}},
                     {{"worker", 2},
                      {"time", "2026-11-23T14:05:01Z"},
                      {"status", "exited with status 1"},
                      {"global_step", nullptr}}};
    const auto lines = summary_lines(s, "/m", {});
    auto has_line = [&](const std::string& line) { return std::find(lines.begin(), lines.end(), line) != lines.end(); };
    CHECK(has_line("restart: ps 1 at 2026-11-28T21:11:32Z (it was killed by Killed at global step 953)"));
    CHECK(has_line("restart: worker 2 at 2026-11-23T14:05:01Z (it exited with status 1 at global step unknown)"));
}
