// Roles from a het job's environment: the variables below are those of a real step
// (`#SBATCH -N1 -n1`, `#SBATCH hetjob`, `#SBATCH -N2 --ntasks-per-node=2`, then
// `srun --het-group=0,1`) on the Slurm lab (test/slurm/het_job_test.sh runs it for real).
#include "launcher/het_job.h"

#include <catch2/catch.hpp>

#include "launcher/map_builder.h"

using namespace psrun;
using namespace psrun::launcher;

namespace {

EnvMap het_step_env(int procid, int nodeid, int localid) {
    return {{"SLURM_JOB_ID", "1"},
            {"SLURM_STEP_ID", "0"},
            {"SLURM_STEP_NODELIST", "n[1-3]"},
            {"SLURM_STEP_TASKS_PER_NODE", "1,2(x2)"},
            {"SLURM_STEP_NUM_TASKS", "5"},
            {"SLURM_PROCID", std::to_string(procid)},
            {"SLURM_NODEID", std::to_string(nodeid)},
            {"SLURM_LOCALID", std::to_string(localid)},
            {"SLURM_HET_SIZE", "2"},
            {"SLURM_JOB_NODELIST_HET_GROUP_0", "n1"},
            {"SLURM_JOB_NODELIST_HET_GROUP_1", "n[2-3]"},
            {"SLURM_NTASKS_HET_GROUP_0", "1"},
            {"SLURM_NTASKS_HET_GROUP_1", "4"}};
}

}  // namespace

TEST_CASE("a step over both components runs psd on component 0 and workers on component 1", "[het]") {
    const int node_of[] = {0, 1, 1, 2, 2}, local_of[] = {0, 0, 1, 0, 1};
    for (int procid = 0; procid < 5; ++procid) {
        const auto m = resolve_map(MapOptions{}, het_step_env(procid, node_of[procid], local_of[procid]));
        REQUIRE(m);
        CHECK(m->ps.size() == 1);
        CHECK(m->ps[0].rfind("n1:", 0) == 0);
        REQUIRE(m->worker.size() == 4);
        CHECK(m->worker[0].rfind("n2:", 0) == 0);
        CHECK(m->worker[3].rfind("n3:", 0) == 0);
        CHECK(m->self->role == (procid == 0 ? Role::kPs : Role::kWorker));
    }
}

TEST_CASE("explicit --ps or --tasks win over the het-job components", "[het]") {
    MapOptions o;
    o.num_ps = 2;
    o.placement = "spread";
    const auto m = resolve_map(o, het_step_env(0, 0, 0));
    REQUIRE(m);
    CHECK(m->ps.size() == 2);
    MapOptions t;
    t.tasks = "ps,ps,worker,worker,worker";
    const auto m2 = resolve_map(t, het_step_env(1, 1, 0));
    REQUIRE(m2);
    CHECK(m2->ps.size() == 2);
    CHECK(m2->self->role == Role::kPs);
}

TEST_CASE("a step in one component only is an ordinary step", "[het]") {
    // srun --het-group=1: the step's 4 tasks are not the job's 5.
    auto env = het_step_env(0, 0, 0);
    env.insert_or_assign("SLURM_STEP_NODELIST", std::string("n[2-3]"));
    env.insert_or_assign("SLURM_STEP_TASKS_PER_NODE", std::string("2(x2)"));
    env.insert_or_assign("SLURM_STEP_NUM_TASKS", std::string("4"));
    const auto m = resolve_map(MapOptions{}, env);
    REQUIRE(m);
    CHECK(m->ps.size() == 1);  // the default: one ps, spread
    CHECK(m->ps[0].rfind("n2:", 0) == 0);
}

TEST_CASE("het-job variables are checked", "[het]") {
    auto shared = het_step_env(0, 0, 0);
    shared.insert_or_assign("SLURM_JOB_NODELIST_HET_GROUP_1", std::string("n[1-3]"));  // n1 in both components
    shared.insert_or_assign("SLURM_NTASKS_HET_GROUP_1", std::string("4"));
    auto m = resolve_map(MapOptions{}, shared);
    REQUIRE_FALSE(m);
    CHECK_THAT(m.error().message,
               Catch::Contains("node n1 is in het-job components 0 and 1") && Catch::Contains("--tasks"));

    auto missing = het_step_env(0, 0, 0);
    missing.erase("SLURM_NTASKS_HET_GROUP_1");
    m = resolve_map(MapOptions{}, missing);
    REQUIRE_FALSE(m);
    CHECK_THAT(m.error().message, Catch::Contains("SLURM_NTASKS_HET_GROUP_1 is unset"));

    auto bad = het_step_env(0, 0, 0);
    bad.insert_or_assign("SLURM_HET_SIZE", std::string("0"));
    m = resolve_map(MapOptions{}, bad);
    REQUIRE_FALSE(m);
    CHECK_THAT(m.error().message, Catch::Contains("SLURM_HET_SIZE='0'"));

    auto all_ps = het_step_env(0, 0, 0);
    all_ps.insert_or_assign("SLURM_JOB_NODELIST_HET_GROUP_0", std::string("n[1-3]"));
    all_ps.insert_or_assign("SLURM_JOB_NODELIST_HET_GROUP_1", std::string("n9"));
    m = resolve_map(MapOptions{}, all_ps);
    REQUIRE_FALSE(m);
    CHECK_THAT(m.error().message, Catch::Contains("no worker is left"));

    const auto groups = parse_het_groups(
        {{"SLURM_HET_SIZE", "2"}, {"SLURM_JOB_NODELIST_HET_GROUP_0", "n[1-"}, {"SLURM_NTASKS_HET_GROUP_0", "1"}});
    REQUIRE_FALSE(groups);
    CHECK_THAT(groups.error().message, Catch::Contains("SLURM_JOB_NODELIST_HET_GROUP_0='n[1-'"));
    REQUIRE(parse_het_groups({}));
    CHECK_FALSE(parse_het_groups({})->has_value());
}
