#include "launcher/role_assignment.h"

#include <catch2/catch.hpp>

using namespace psrun::launcher;

namespace {

std::string render(const std::vector<TaskRole>& roles) {
    std::string out;
    for (TaskRole r : roles)
        out += r == TaskRole::kPs ? 'P' : r == TaskRole::kWorker ? 'w' : r == TaskRole::kChief ? 'C' : 'E';
    return out;
}

}  // namespace

TEST_CASE("task lists parse every role and reject unknown ones", "[roles]") {
    CHECK(render(*parse_task_list("ps,worker,chief,evaluator")) == "PwCE");
    for (const char* bad : {"ps,wroker", "ps,,worker", "", "PS,worker", "ps,worker,", " ps"}) {
        CAPTURE(bad);
        const auto r = parse_task_list(bad);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains("expected one of ps, worker, chief, evaluator"));
    }
}

TEST_CASE("task lists must match the number of tasks", "[roles]") {
    const auto roles = *parse_task_list("ps,worker,worker");
    CHECK(check_task_list(roles, 3));
    const auto short_list = check_task_list(roles, 4);
    REQUIRE_FALSE(short_list);
    CHECK_THAT(short_list.error().message, Catch::Contains("3 elements") && Catch::Contains("4 tasks"));
    CHECK_FALSE(check_task_list(roles, 2));
    CHECK_FALSE(check_task_list(*parse_task_list("ps,chief,chief"), 3));
    CHECK_FALSE(check_task_list(*parse_task_list("ps,ps"), 2));
    CHECK_FALSE(check_task_list(*parse_task_list("ps,evaluator"), 2));
    CHECK(check_task_list(*parse_task_list("ps,chief"), 2));
}

TEST_CASE("spread puts one ps per node first, round-robin", "[roles]") {
    CHECK(render(*place_ps({4, 4}, 2, Placement::kSpread)) == "PwwwPwww");
    CHECK(render(*place_ps({2, 2, 2}, 2, Placement::kSpread)) == "PwPwww");
    CHECK(render(*place_ps({4, 1, 1}, 2, Placement::kSpread)) == "PwwwPw");
    CHECK(render(*place_ps({2, 2}, 3, Placement::kSpread)) == "PPPw");
    CHECK(render(*place_ps({3, 1, 2}, 4, Placement::kSpread)) == "PPwPPw");
    CHECK(render(*place_ps({4}, 1, Placement::kSpread)) == "Pwww");
}

TEST_CASE("pack puts ps on the first slots", "[roles]") {
    CHECK(render(*place_ps({4, 4}, 2, Placement::kPack)) == "PPwwwwww");
    CHECK(render(*place_ps({1, 1, 1}, 2, Placement::kPack)) == "PPw");
    CHECK(render(*place_ps({2, 2}, 0, Placement::kPack)) == "wwww");
}

TEST_CASE("placement leaves at least one worker", "[roles]") {
    for (Placement p : {Placement::kSpread, Placement::kPack}) {
        const auto r = place_ps({2, 1}, 3, p);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains("no worker"));
        CHECK_FALSE(place_ps({2, 1}, -1, p));
    }
    CHECK(parse_placement("pack") == Placement::kPack);
    CHECK_FALSE(parse_placement("scatter"));
}

TEST_CASE("slot index is node-major", "[roles]") {
    CHECK(slot_index({4, 1, 1}, 0, 3) == 3);
    CHECK(slot_index({4, 1, 1}, 1, 0) == 4);
    CHECK(slot_index({4, 1, 1}, 2, 0) == 5);
    CHECK(slot_index({2, 2, 1}, 2, 0) == 4);
}
