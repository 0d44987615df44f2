// The data-position rule of a resumed run (workerd/preemption.h).
#include <catch2/catch.hpp>

#include "workerd/preemption.h"

namespace psrun::worker {

TEST_CASE("resume_batches: G/W per worker in async mode (remainder to the lowest ranks), G in sync", "[preemption]") {
    CHECK(resume_batches(0, 3, 0, false) == 0);
    CHECK(resume_batches(10, 1, 0, false) == 10);
    // 10 async global steps over 3 workers: 4 + 3 + 3 pushes.
    CHECK(resume_batches(10, 3, 0, false) == 4);
    CHECK(resume_batches(10, 3, 1, false) == 3);
    CHECK(resume_batches(10, 3, 2, false) == 3);
    std::uint64_t total = 0;
    for (std::uint32_t i = 0; i < 7; ++i) total += resume_batches(1234, 7, i, false);
    CHECK(total == 1234);
    // Sync: every worker pushes once per global step.
    CHECK(resume_batches(10, 3, 2, true) == 10);
}

}  // namespace psrun::worker
