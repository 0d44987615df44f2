#include "launcher/slurm_env.h"

#include <catch2/catch.hpp>

using psrun::ErrorCode;
using psrun::launcher::EnvMap;
using psrun::launcher::SlurmEnv;

namespace {

// Task 3 of `srun -N3 -n6 --ntasks-per-node=2` (values seen in the Slurm lab).
EnvMap step_env() {
    return {{"SLURM_JOB_ID", "17"},
            {"SLURM_STEP_ID", "0"},
            {"SLURM_STEP_NODELIST", "n[1-3]"},
            {"SLURM_JOB_NODELIST", "n[1-3]"},
            {"SLURM_STEP_TASKS_PER_NODE", "2(x3)"},
            {"SLURM_STEP_NUM_TASKS", "6"},
            {"SLURM_NTASKS", "6"},
            {"SLURM_PROCID", "3"},
            {"SLURM_NODEID", "1"},
            {"SLURM_LOCALID", "1"},
            {"SLURMD_NODENAME", "n2"}};
}

}  // namespace

TEST_CASE("SlurmEnv parses a step task", "[slurm_env]") {
    const auto s = SlurmEnv::parse(step_env());
    REQUIRE(s);
    CHECK(s->nodes == std::vector<std::string>{"n1", "n2", "n3"});
    CHECK(s->tasks_per_node == std::vector<int>{2, 2, 2});
    CHECK(s->num_tasks == 6);
    CHECK(s->procid == 3);
    CHECK(s->nodeid == 1);
    CHECK(s->localid == 1);
    CHECK(s->job_id == 17);
    CHECK(s->step_id == 0);
    CHECK_FALSE(s->cpus_per_task);
    CHECK(s->resv_ports.empty());
}

TEST_CASE("SlurmEnv reads optional variables", "[slurm_env]") {
    EnvMap env = step_env();
    env["SLURM_CPUS_PER_TASK"] = std::string("4");
    env["SLURM_STEP_RESV_PORTS"] = std::string("20001-20002");
    env["SLURM_STEP_ID"] = std::string("2");
    const auto s = SlurmEnv::parse(env);
    REQUIRE(s);
    CHECK(s->cpus_per_task == 4);
    CHECK(s->resv_ports == std::vector<int>{20001, 20002});
    CHECK(s->step_id == 2);
}

TEST_CASE("SlurmEnv accepts SLURM_GTIDS that match a cyclic layout", "[slurm_env]") {
    // srun -N3 -n6 -m cyclic, task 3: node n1 holds PROCIDs 0,3,4,5 at local ids 0..3.
    const EnvMap env = {{"SLURM_JOB_ID", "8"},
                        {"SLURM_STEP_ID", "0"},
                        {"SLURM_STEP_NODELIST", "n[1-3]"},
                        {"SLURM_STEP_TASKS_PER_NODE", "4,1(x2)"},
                        {"SLURM_STEP_NUM_TASKS", "6"},
                        {"SLURM_PROCID", "3"},
                        {"SLURM_NODEID", "0"},
                        {"SLURM_LOCALID", "1"},
                        {"SLURM_GTIDS", "0,3,4,5"},
                        {"SLURMD_NODENAME", "n1"}};
    const auto s = SlurmEnv::parse(env);
    REQUIRE(s);
    CHECK(s->procid == 3);
    CHECK(s->localid == 1);
}

TEST_CASE("SlurmEnv falls back to job variables", "[slurm_env]") {
    EnvMap env = step_env();
    env.erase("SLURM_STEP_NODELIST");
    env.erase("SLURM_STEP_NUM_TASKS");
    env["SLURM_TASKS_PER_NODE"] = std::string("2(x3)");
    env.erase("SLURM_STEP_TASKS_PER_NODE");
    const auto s = SlurmEnv::parse(env);
    REQUIRE(s);
    CHECK(s->nodes.size() == 3);
    CHECK(s->num_tasks == 6);
}

TEST_CASE("SlurmEnv refuses a batch shell and advises srun", "[slurm_env]") {
    // What `sbatch -N3 --ntasks-per-node=2` gives the batch shell: no SLURM_STEP_*.
    const EnvMap batch = {{"SLURM_JOB_ID", "5"},
                          {"SLURM_JOB_NODELIST", "n[1-3]"},
                          {"SLURM_TASKS_PER_NODE", "2(x3)"},
                          {"SLURM_NTASKS", "6"},
                          {"SLURM_PROCID", "0"},
                          {"SLURM_LOCALID", "0"},
                          {"SLURM_NODEID", "0"},
                          {"SLURM_CPUS_PER_TASK", "1"}};
    const auto s = SlurmEnv::parse(batch);
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Catch::Contains("not a job step") && Catch::Contains("srun"));
}

TEST_CASE("SlurmEnv outside any job says what to do", "[slurm_env]") {
    const auto s = SlurmEnv::parse(EnvMap{{"HOME", "/root"}});
    REQUIRE_FALSE(s);
    CHECK(s.error().code == ErrorCode::kNotFound);
    CHECK_THAT(s.error().message, Catch::Contains("psrun local"));
}

TEST_CASE("SlurmEnv errors name the variable", "[slurm_env]") {
    struct Case {
        const char* var;
        const char* value;  // nullptr: unset
        const char* named;
    };
    const Case c = GENERATE(
        Case{"SLURM_PROCID", "6", "SLURM_PROCID"}, Case{"SLURM_PROCID", "-1", "SLURM_PROCID"},
        Case{"SLURM_PROCID", nullptr, "SLURM_PROCID"}, Case{"SLURM_PROCID", "3x", "SLURM_PROCID"},
        Case{"SLURM_NODEID", "3", "SLURM_NODEID"}, Case{"SLURM_LOCALID", "2", "SLURM_LOCALID"},
        Case{"SLURM_LOCALID", nullptr, "SLURM_LOCALID"}, Case{"SLURM_STEP_NODELIST", "n[1-", "SLURM_STEP_NODELIST"},
        Case{"SLURM_STEP_NODELIST", "n[1-2]", "SLURM_STEP_TASKS_PER_NODE"},
        Case{"SLURM_STEP_TASKS_PER_NODE", "2(x", "SLURM_STEP_TASKS_PER_NODE"},
        Case{"SLURM_STEP_TASKS_PER_NODE", "2(x2),1", "SLURM_STEP_NUM_TASKS"},
        Case{"SLURM_STEP_NUM_TASKS", "7", "SLURM_STEP_NUM_TASKS"},
        Case{"SLURM_CPUS_PER_TASK", "0", "SLURM_CPUS_PER_TASK"},
        Case{"SLURM_CPUS_PER_TASK", "two", "SLURM_CPUS_PER_TASK"},
        Case{"SLURM_STEP_RESV_PORTS", "5-3", "SLURM_STEP_RESV_PORTS"}, Case{"SLURMD_NODENAME", "n3", "SLURMD_NODENAME"},
        Case{"SLURM_JOB_ID", "abc", "SLURM_JOB_ID"}, Case{"SLURM_GTIDS", "2,4", "SLURM_GTIDS"},
        Case{"SLURM_GTIDS", "2,3,4", "SLURM_GTIDS"}, Case{"SLURM_GTIDS", "2,x", "SLURM_GTIDS"},
        Case{"SLURM_GTIDS", "2,", "SLURM_GTIDS"});
    EnvMap env = step_env();
    if (c.value) env[c.var] = c.value;
    else env.erase(c.var);
    CAPTURE(c.var, c.value ? c.value : "(unset)");
    const auto s = SlurmEnv::parse(env);
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Catch::Contains(c.named));
}
