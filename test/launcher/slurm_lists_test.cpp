#include "launcher/slurm_lists.h"

#include <catch2/catch.hpp>

using psrun::launcher::parse_port_list;
using psrun::launcher::parse_tasks_per_node;

using Ints = std::vector<int>;

TEST_CASE("tasks-per-node lists expand repeats", "[tasks_per_node]") {
    CHECK(*parse_tasks_per_node("4") == Ints{4});
    CHECK(*parse_tasks_per_node("2(x3),1") == Ints{2, 2, 2, 1});
    CHECK(*parse_tasks_per_node("4,1(x2)") == Ints{4, 1, 1});
    CHECK(*parse_tasks_per_node("3(x2),2,1") == Ints{3, 3, 2, 1});
    CHECK(*parse_tasks_per_node("2(x1)") == Ints{2});
}

TEST_CASE("tasks-per-node rejects malformed items", "[tasks_per_node]") {
    const char* bad = GENERATE("", "2(x", "2(x3", "2(3)", "2x3", "0", "2(x0)", "-1", "a", "2,,1", "2,", ",2", "2(x3),",
                               "1(x)", "2 (x3)", "2(x3)1", "9999999999", "2(x1000001)");
    CAPTURE(bad);
    const auto r = parse_tasks_per_node(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == psrun::ErrorCode::kInvalidArgument);
}

TEST_CASE("tasks-per-node errors quote the bad item", "[tasks_per_node]") {
    const auto r = parse_tasks_per_node("2(x3),2(x");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("'2(x'"));
}

TEST_CASE("reserved port lists expand ranges and lists", "[ports]") {
    CHECK(*parse_port_list("20001-20003") == Ints{20001, 20002, 20003});
    CHECK(*parse_port_list("1000,1002") == Ints{1000, 1002});
    CHECK(*parse_port_list("1000-1001,1005") == Ints{1000, 1001, 1005});
    CHECK(*parse_port_list("65535") == Ints{65535});
}

TEST_CASE("reserved port lists reject bad ports", "[ports]") {
    const char* bad = GENERATE("", "0", "65536", "3-1", "1000,1000", "1000-1002,1001", "a", "1000-", "-5", "1,,2");
    CAPTURE(bad);
    CHECK_FALSE(parse_port_list(bad));
}
