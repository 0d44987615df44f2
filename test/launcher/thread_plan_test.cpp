#include "launcher/thread_plan.h"

#include <catch2/catch.hpp>

using namespace psrun::launcher;

TEST_CASE("local_thread_plan divides the cores among the workers, psd gets 1", "[threads]") {
    struct Case {
        int cores, workers, worker_threads;
    };
    const Case c = GENERATE(Case{2, 2, 1}, Case{1, 2, 1}, Case{4, 1, 4}, Case{8, 3, 2}, Case{0, 2, 1}, Case{16, 4, 4});
    const ThreadPlan plan = local_thread_plan(std::nullopt, c.cores, c.workers);
    CHECK(plan.worker_threads == c.worker_threads);
    CHECK(plan.ps_threads == 1);
    CHECK_FALSE(plan.explicit_threads);
}

TEST_CASE("--threads gives every daemon T", "[threads]") {
    const ThreadPlan plan = local_thread_plan(3, 2, 2);
    CHECK(plan.worker_threads == 3);
    CHECK(plan.ps_threads == 3);
    CHECK(plan.explicit_threads);
}

TEST_CASE("describe_thread_plan names the cores, the split and the override", "[threads]") {
    CHECK(describe_thread_plan(local_thread_plan(std::nullopt, 2, 2), 2, 2, 1) ==
          "2 cores in this process's affinity mask: 1 thread per worker (2 workers), 1 per psd; --threads T "
          "overrides");
    CHECK(describe_thread_plan(local_thread_plan(std::nullopt, 4, 1), 4, 1, 0) ==
          "4 cores in this process's affinity mask: 4 threads for the standalone worker; --threads T overrides");
    CHECK(describe_thread_plan(local_thread_plan(3, 1, 1), 1, 1, 1) ==
          "1 core in this process's affinity mask: --threads 3 for every daemon (1 worker, 1 psd)");
}

TEST_CASE("the default plan fits the mask; more threads than cores warn with the numbers", "[threads]") {
    for (int cores : {1, 2, 3, 4, 8})
        for (int workers : {1, 2, 4})
            if (workers <= cores)
                CHECK_FALSE(local_oversubscription(local_thread_plan(std::nullopt, cores, workers), cores, workers, 2));
    const auto two_on_one = local_oversubscription(local_thread_plan(2, 1, 2), 1, 2, 1);
    REQUIRE(two_on_one);
    CHECK_THAT(*two_on_one, Catch::Contains("2 workers x 2 threads + 1 psd x 1 beyond the poll loop = 5 compute "
                                            "threads on 1 core") &&
                                Catch::Contains("--workers 1"));
    const auto four_on_two = local_oversubscription(local_thread_plan(2, 2, 2), 2, 2, 1);
    REQUIRE(four_on_two);
    CHECK_THAT(*four_on_two, Catch::Contains("= 5 compute threads on 2 cores") && Catch::Contains("--threads 1"));
    CHECK_FALSE(local_oversubscription(local_thread_plan(4, 0, 2), 0, 2, 1));  // mask unknown: no guess
}

TEST_CASE("task_oversubscription compares one daemon's threads with its mask", "[threads]") {
    CHECK_FALSE(task_oversubscription(2, 2));
    CHECK_FALSE(task_oversubscription(std::nullopt, 2));
    CHECK_FALSE(task_oversubscription(4, 0));
    const auto w = task_oversubscription(4, 2);
    REQUIRE(w);
    CHECK_THAT(*w, Catch::Contains("4 threads") && Catch::Contains("2 cores") && Catch::Contains("--threads 2"));
}

TEST_CASE("affinity_cpu_count sees at least one CPU", "[threads]") { CHECK(affinity_cpu_count() >= 1); }
