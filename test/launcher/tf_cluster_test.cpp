#include "launcher/tf_cluster.h"

#include <catch2/catch.hpp>

using namespace psrun;
using namespace psrun::launcher;

TEST_CASE("TF flags build the map (seed 003 spelling)", "[tf]") {
    TfFlags f{"127.0.0.1:2222", "127.0.0.1:2223,127.0.0.1:2224", "worker", 1};
    const auto m = map_from_tf_flags(f);
    REQUIRE(m);
    CHECK(m->ps == std::vector<std::string>{"127.0.0.1:2222"});
    CHECK(m->worker.size() == 2);
    CHECK(m->chief() == "127.0.0.1:2223");
    REQUIRE(m->self);
    CHECK(m->self->role == Role::kWorker);
    CHECK(m->self->index == 1);
    CHECK(m->self->rank == 2);  // ps first, then workers
    CHECK(m->self->node == "127.0.0.1");
    CHECK(m->source == "flags");
}

TEST_CASE("TF flags are validated", "[tf]") {
    struct Case {
        TfFlags flags;
        const char* named;
    };
    const Case c =
        GENERATE(Case{{"a:1", "", "worker", 0}, "--worker_hosts"}, Case{{"a:1", "b:2", "master", 0}, "--job_name"},
                 Case{{"a:1", "b:2", "worker", std::nullopt}, "--task_index"},
                 Case{{"a:1", "b:2", "worker", 1}, "--task_index 1"}, Case{{"a:1", "b:2", "ps", -1}, "--task_index"},
                 Case{{"a", "b:2", "ps", 0}, "--ps_hosts"}, Case{{"a:1", "b:0", "ps", 0}, "--worker_hosts"},
                 Case{{"a:1", "b:99999", "ps", 0}, "--worker_hosts"}, Case{{"a:1,", "b:2", "ps", 0}, "--ps_hosts"},
                 Case{{"a:1", "a:1", "ps", 0}, "listed twice"});
    const auto m = map_from_tf_flags(c.flags);
    REQUIRE_FALSE(m);
    CHECK_THAT(m.error().message, Catch::Contains(c.named));
}

TEST_CASE("TF_CONFIG with a named chief makes it worker 0", "[tf]") {
    const std::string cluster = R"("cluster": {"chief": ["c:2000"], "ps": ["p:2002"], "worker": ["w:2001", "w:2003"]})";
    auto parse = [&](const std::string& task) {
        return map_from_tf_config("{" + cluster + R"(, "task": )" + task + "}");
    };
    const auto chief = parse(R"({"type": "chief", "index": 0})");
    REQUIRE(chief);
    CHECK(chief->worker == std::vector<std::string>{"c:2000", "w:2001", "w:2003"});
    CHECK(chief->chief() == "c:2000");
    CHECK(chief->self->role == Role::kWorker);
    CHECK(chief->self->index == 0);

    const auto worker1 = parse(R"({"type": "worker", "index": 1})");
    REQUIRE(worker1);
    CHECK(worker1->self->index == 2);
    CHECK(worker1->self->node == "w");

    const auto ps = parse(R"({"type": "ps", "index": 0})");
    REQUIRE(ps);
    CHECK(ps->self->role == Role::kPs);
    CHECK(ps->self->rank == 0);

    const auto eval = parse(R"({"type": "evaluator", "index": 0})");
    REQUIRE(eval);
    CHECK(eval->self->role == Role::kEvaluator);
    CHECK(eval->evaluator.size() == 1);
}

TEST_CASE("TF_CONFIG without a chief makes worker 0 the chief", "[tf]") {
    const auto m = map_from_tf_config(
        R"({"cluster": {"ps": ["p:1"], "worker": ["w:1", "w:2"]}, "task": {"type": "worker", "index": 0}})");
    REQUIRE(m);
    CHECK(m->chief() == "w:1");
    CHECK(m->chief_index == 0);
    CHECK(m->source == "TF_CONFIG");
}

TEST_CASE("TF_CONFIG errors name the field", "[tf]") {
    struct Case {
        const char* json;
        const char* named;
    };
    const Case c = GENERATE(
        Case{"not json", "not valid JSON"}, Case{"[1]", "JSON object"},
        Case{R"({"task": {"type": "ps", "index": 0}})", "TF_CONFIG.cluster"},
        Case{R"({"cluster": {"worker": ["w:1"]}})", "TF_CONFIG.task"},
        Case{R"({"cluster": {"worker": ["w:1"]}, "task": {"index": 0}})", "TF_CONFIG.task.type"},
        Case{R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker"}})", "TF_CONFIG.task.index"},
        Case{R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": "0"}})", "TF_CONFIG.task.index"},
        Case{R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "boss", "index": 0}})", "boss"},
        Case{R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": 1}})", "out of range"},
        Case{R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": -1}})", "out of range"},
        Case{R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "ps", "index": 0}})", "out of range"},
        Case{R"({"cluster": {"worker": "w:1"}, "task": {"type": "worker", "index": 0}})", "TF_CONFIG.cluster.worker"},
        Case{R"({"cluster": {"worker": [1]}, "task": {"type": "worker", "index": 0}})", "TF_CONFIG.cluster.worker[0]"},
        Case{R"({"cluster": {"worker": ["w"]}, "task": {"type": "worker", "index": 0}})",
             "TF_CONFIG.cluster.worker[0]"},
        Case{R"({"cluster": {"master": ["w:1"]}, "task": {"type": "worker", "index": 0}})", "master"},
        Case{R"({"cluster": {"chief": ["a:1", "b:1"], "worker": []}, "task": {"type": "chief", "index": 0}})",
             "TF_CONFIG.cluster.chief"},
        Case{R"({"cluster": {"ps": ["p:1"]}, "task": {"type": "ps", "index": 0}})", "no chief and no worker"});
    CAPTURE(c.json);
    const auto m = map_from_tf_config(c.json);
    REQUIRE_FALSE(m);
    CHECK(m.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(m.error().message, Catch::Contains(c.named));
}
