#include "launcher/map_builder.h"

#include <catch2/catch.hpp>

#include "launcher/role_assignment.h"

using namespace psrun;
using namespace psrun::launcher;

namespace {

struct Task {
    int procid, nodeid, localid;
};

EnvMap task_env(const std::string& nodes, const std::string& tpn, int ntasks, Task t) {
    return {{"SLURM_JOB_ID", "42"},
            {"SLURM_STEP_ID", "0"},
            {"SLURM_STEP_NODELIST", nodes},
            {"SLURM_STEP_TASKS_PER_NODE", tpn},
            {"SLURM_STEP_NUM_TASKS", std::to_string(ntasks)},
            {"SLURM_PROCID", std::to_string(t.procid)},
            {"SLURM_NODEID", std::to_string(t.nodeid)},
            {"SLURM_LOCALID", std::to_string(t.localid)}};
}

// The map without the caller's own view: what every task must agree on.
nlohmann::ordered_json shared_part(const ClusterMap& m) {
    auto j = m.to_json();
    j.erase("self");
    return j;
}

}  // namespace

TEST_CASE("a block step with tf4slurm's task list puts one ps on each node", "[map]") {
    MapOptions o;
    o.tasks = "ps,worker,worker,worker,ps,worker,worker,worker";
    std::optional<nlohmann::ordered_json> first;
    for (int rank = 0; rank < 8; ++rank) {
        const auto m = resolve_map(o, task_env("n[1-2]", "4(x2)", 8, {rank, rank / 4, rank % 4}));
        REQUIRE(m);
        if (!first) first = shared_part(*m);
        CHECK(shared_part(*m) == *first);
        CHECK(m->self->rank == rank);  // block: rank == SLURM_PROCID
        CHECK(m->self->procid == rank);
        CHECK(m->self->node == (rank < 4 ? "n1" : "n2"));
        CHECK(m->self->role == (rank % 4 == 0 ? Role::kPs : Role::kWorker));
    }
    const auto m = *resolve_map(o, task_env("n[1-2]", "4(x2)", 8, {5, 1, 1}));
    CHECK(m.ps.size() == 2);
    CHECK(m.ps[0].rfind("n1:", 0) == 0);
    CHECK(m.ps[1].rfind("n2:", 0) == 0);
    CHECK(m.worker.size() == 6);
    CHECK(m.chief() == m.worker[0]);
    CHECK(m.self->index == 3);
}

TEST_CASE("a cyclic step maps ranks through NODEID/LOCALID", "[map]") {
    // srun -N3 -n6 -m cyclic on free nodes: SLURM_TASKS_PER_NODE=4,1(x2),
    // procid 0->n1, 1->n2, 2->n3, 3,4,5->n1 (local ids 1,2,3).
    const std::vector<Task> tasks = {{0, 0, 0}, {1, 1, 0}, {2, 2, 0}, {3, 0, 1}, {4, 0, 2}, {5, 0, 3}};
    MapOptions o;
    o.num_ps = 2;
    o.placement = "spread";
    std::optional<nlohmann::ordered_json> first;
    for (const Task& t : tasks) {
        const auto m = resolve_map(o, task_env("n[1-3]", "4,1(x2)", 6, t));
        REQUIRE(m);
        if (!first) first = shared_part(*m);
        CHECK(shared_part(*m) == *first);
        CHECK(m->self->procid == t.procid);
        CHECK(m->self->node == std::string("n") + std::to_string(t.nodeid + 1));
        CHECK(m->self->rank == slot_index({4, 1, 1}, t.nodeid, t.localid));
        // spread: local id 0 of n1 and of n2 are the ps, whatever their SLURM_PROCID.
        const bool is_ps = t.localid == 0 && t.nodeid < 2;
        CHECK(m->self->role == (is_ps ? Role::kPs : Role::kWorker));
    }
    const auto m = *resolve_map(o, task_env("n[1-3]", "4,1(x2)", 6, {1, 1, 0}));
    CHECK(m.ps[0].rfind("n1:", 0) == 0);
    CHECK(m.ps[1].rfind("n2:", 0) == 0);
    CHECK(m.self->rank == 4);  // slot index, not SLURM_PROCID 1
    CHECK(m.self->index == 1);
    CHECK(m.worker.size() == 4);
}

TEST_CASE("an arbitrary layout from a hostfile is mapped by node", "[map]") {
    // SLURM_HOSTFILE n1 n1 n2 n2 n3 with -m arbitrary: SLURM_TASKS_PER_NODE=2(x2),1.
    MapOptions o;
    o.tasks = "ps,chief,ps,worker,evaluator";
    const auto m = resolve_map(o, task_env("n[1-3]", "2(x2),1", 5, {4, 2, 0}));
    REQUIRE(m);
    CHECK(m->self->role == Role::kEvaluator);
    CHECK(m->self->node == "n3");
    CHECK(m->evaluator.size() == 1);
    CHECK(m->worker.size() == 2);
    CHECK(m->chief_index == 0);
    const auto j = m->to_json();
    CHECK(j["chief"] == m->worker[0]);
}

TEST_CASE("a chief in the task list is not necessarily worker 0", "[map]") {
    MapOptions o;
    o.tasks = "ps,worker,chief,worker";
    const auto m = resolve_map(o, task_env("n1", "4", 4, {2, 0, 2}));
    REQUIRE(m);
    CHECK(m->chief_index == 1);
    CHECK(m->self->index == 1);
    CHECK(m->slots[2].chief);
    CHECK_FALSE(m->slots[1].chief);
}

TEST_CASE("task list length and roles are checked against the step", "[map]") {
    MapOptions o;
    o.tasks = "ps,worker,worker";
    const auto m = resolve_map(o, task_env("n[1-2]", "2(x2)", 4, {0, 0, 0}));
    REQUIRE_FALSE(m);
    CHECK_THAT(m.error().message, Catch::Contains("--tasks has 3 elements"));
    o.tasks = "ps,worker,boss,worker";
    CHECK_FALSE(resolve_map(o, task_env("n[1-2]", "2(x2)", 4, {0, 0, 0})));
}

TEST_CASE("default is one ps, spread", "[map]") {
    const auto m = resolve_map(MapOptions{}, task_env("n[1-2]", "2(x2)", 4, {0, 0, 0}));
    REQUIRE(m);
    CHECK(m->ps.size() == 1);
    CHECK(m->worker.size() == 3);
    CHECK(m->self->role == Role::kPs);
}

TEST_CASE("reserved ports are used per local id", "[map]") {
    EnvMap env = task_env("n[1-2]", "2(x2)", 4, {3, 1, 1});
    env["SLURM_STEP_RESV_PORTS"] = std::string("20001-20002");
    const auto m = resolve_map(MapOptions{}, env);
    REQUIRE(m);
    CHECK(m->ps == std::vector<std::string>{"n1:20001"});
    CHECK(m->worker == std::vector<std::string>{"n1:20002", "n2:20001", "n2:20002"});
    env["SLURM_STEP_RESV_PORTS"] = std::string("20001");
    const auto few = resolve_map(MapOptions{}, env);
    REQUIRE_FALSE(few);
    CHECK_THAT(few.error().message, Catch::Contains("SLURM_STEP_RESV_PORTS"));
}

TEST_CASE("derived ports differ between jobs sharing a node", "[map]") {
    EnvMap a = task_env("n1", "2", 2, {0, 0, 0});
    EnvMap b = a;
    b["SLURM_JOB_ID"] = std::string("43");
    const auto ma = *resolve_map(MapOptions{}, a);
    const auto mb = *resolve_map(MapOptions{}, b);
    for (const auto& x : ma.slots)
        for (const auto& y : mb.slots) CHECK(x.address != y.address);
}

TEST_CASE("plan JSON has the contracted shape", "[map]") {
    EnvMap env = task_env("n[1-2]", "2(x2)", 4, {2, 1, 0});
    env["SLURM_CPUS_PER_TASK"] = std::string("3");
    MapOptions o;
    o.num_ps = 2;
    const auto m = resolve_map(o, env);
    REQUIRE(m);
    const auto j = nlohmann::json::parse(m->to_json().dump());
    std::vector<std::string> keys;
    const auto ordered = m->to_json();
    for (const auto& [k, v] : ordered.items()) keys.push_back(k);
    REQUIRE(keys.size() >= 4);
    CHECK(std::vector<std::string>(keys.begin(), keys.begin() + 4) ==
          std::vector<std::string>{"ps", "worker", "chief", "self"});
    CHECK(j["ps"].size() == 2);
    CHECK(j["ps"][0].get<std::string>().rfind("n1:", 0) == 0);
    CHECK(j["worker"].size() == 2);
    CHECK(j["chief"] == j["worker"][0]);
    CHECK(j["self"]["rank"] == 2);
    CHECK(j["self"]["role"] == "ps");
    CHECK(j["self"]["index"] == 1);
    CHECK(j["self"]["node"] == "n2");
    CHECK(j["threads"] == 3);
    std::vector<std::string> self_keys;
    for (const auto& [k, v] : ordered["self"].items()) self_keys.push_back(k);
    REQUIRE(self_keys.size() >= 4);
    CHECK(std::vector<std::string>(self_keys.begin(), self_keys.begin() + 4) ==
          std::vector<std::string>{"rank", "role", "index", "node"});
}

TEST_CASE("sources: flags beat TF_CONFIG beats Slurm", "[map]") {
    EnvMap env = task_env("n1", "2", 2, {0, 0, 0});
    env["TF_CONFIG"] = R"({"cluster": {"ps": ["p:1"], "worker": ["w:1"]}, "task": {"type": "ps", "index": 0}})";
    CHECK(resolve_map(MapOptions{}, env)->source == "TF_CONFIG");
    MapOptions o;
    o.tf = TfFlags{"a:1", "b:1", "worker", 0};
    CHECK(resolve_map(o, env)->source == "flags");
    env.erase("TF_CONFIG");
    CHECK(resolve_map(MapOptions{}, env)->source == "slurm");
    const auto none = resolve_map(MapOptions{}, EnvMap{});
    REQUIRE_FALSE(none);
    CHECK_THAT(none.error().message, Catch::Contains("not inside a Slurm job"));
}

TEST_CASE("threads come from --threads, else SLURM_CPUS_PER_TASK, else the affinity mask", "[map]") {
    EnvMap env = task_env("n1", "2", 2, {0, 0, 0});
    CHECK_FALSE(resolve_map(MapOptions{}, env)->threads);
    CHECK(resolve_map(MapOptions{}, env, 3)->threads == 3);
    env["SLURM_CPUS_PER_TASK"] = std::string("6");
    CHECK(resolve_map(MapOptions{}, env)->threads == 6);
    CHECK(resolve_map(MapOptions{}, env, 3)->threads == 6);
    MapOptions o;
    o.threads = 2;
    CHECK(resolve_map(o, env, 3)->threads == 2);
}

TEST_CASE("preview uses block distribution and validates --procid", "[map]") {
    MapOptions o;
    o.preview_nodelist = "n[1-2]";
    o.preview_tasks_per_node = "4(x2)";
    o.preview_procid = 6;
    const auto m = resolve_map(o, EnvMap{});
    REQUIRE(m);
    CHECK(m->self->node == "n2");
    CHECK(m->self->rank == 6);
    o.preview_procid = 8;
    const auto bad = resolve_map(o, EnvMap{});
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("--procid 8"));
    o.preview_procid = 0;
    o.preview_nodelist = "n[1-";
    CHECK_THAT(resolve_map(o, EnvMap{}).error().message, Catch::Contains("--nodelist"));
}

TEST_CASE("--interface uses the interface address and needs every node's address", "[map]") {
    MapOptions o;
    o.address.interface = "lo";
    const auto one = resolve_map(o, task_env("n1", "2", 2, {0, 0, 0}));
    REQUIRE(one);
    CHECK(one->ps[0].rfind("127.0.0.1:", 0) == 0);
    const auto two = resolve_map(o, task_env("n[1-2]", "1(x2)", 2, {0, 0, 0}));
    REQUIRE_FALSE(two);
    CHECK_THAT(two.error().message, Catch::Contains("--node-addrs"));
    o.address.node_addrs = "n1=127.0.0.1,n2=10.9.8.7";
    const auto both = resolve_map(o, task_env("n[1-2]", "1(x2)", 2, {0, 0, 0}));
    REQUIRE(both);
    CHECK(both->worker[0].rfind("10.9.8.7:", 0) == 0);
    o.address.node_addrs = "n1=10.0.0.1,n2=10.9.8.7";
    CHECK_FALSE(resolve_map(o, task_env("n[1-2]", "1(x2)", 2, {0, 0, 0})));
    o.address.no_ib = true;
    CHECK(resolve_map(o, task_env("n[1-2]", "1(x2)", 2, {0, 0, 0}))->ps[0].rfind("n1:", 0) == 0);
    // Nodes sharing one interface address would get the same host:port twice.
    o.address.no_ib = false;
    o.address.node_addrs = "n1=127.0.0.1,n2=127.0.0.1";
    const auto shared = resolve_map(o, task_env("n[1-2]", "1(x2)", 2, {0, 0, 0}));
    REQUIRE_FALSE(shared);
    CHECK_THAT(shared.error().message, Catch::Contains("given to two tasks"));
    MapOptions bad;
    bad.address.interface = "no-such-if0";
    CHECK_THAT(resolve_map(bad, task_env("n1", "2", 2, {0, 0, 0})).error().message, Catch::Contains("no-such-if0"));
}

TEST_CASE("local map puts ps, workers and evaluators in rank order", "[map]") {
    const auto m = local_map(1, 2, 1, {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"});
    REQUIRE(m);
    CHECK(m->ps == std::vector<std::string>{"127.0.0.1:1"});
    CHECK(m->chief() == "127.0.0.1:2");
    CHECK(m->evaluator == std::vector<std::string>{"127.0.0.1:4"});
    CHECK(m->validate().empty());
    CHECK_FALSE(local_map(1, 0, 0, {"a:1"}));
}

TEST_CASE("a one-task step defaults to a standalone worker", "[map]") {
    const auto m = resolve_map(MapOptions{}, task_env("n1", "1", 1, {0, 0, 0}));
    REQUIRE(m);
    CHECK(m->ps.empty());
    CHECK(m->worker.size() == 1);
    CHECK(m->self->role == Role::kWorker);
    MapOptions o;
    o.num_ps = 1;
    CHECK_THAT(resolve_map(o, task_env("n1", "1", 1, {0, 0, 0})).error().message, Catch::Contains("no worker"));
}
