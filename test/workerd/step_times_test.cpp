// StepTimes (workerd/step_times.h): quantiles from the log-scale histogram within 4.4%, the exact
// longest step and where it ended.
#include "workerd/step_times.h"

#include <catch2/catch.hpp>

using psrun::worker::StepTimes;

TEST_CASE("step times: quantiles within a bucket, the longest step exact", "[step_times]") {
    StepTimes t;
    CHECK(t.quantile(0.5) == 0);
    CHECK(t.text() == "no step");
    for (std::uint64_t s = 1; s <= 990; ++s) t.add(0.010 + 1e-6 * static_cast<double>(s % 7), s);  // ~10 ms
    for (std::uint64_t s = 991; s <= 1000; ++s) t.add(s == 995 ? 1.534 : 0.100, s);                // ten slow ones
    CHECK(t.count() == 1000);
    CHECK(t.quantile(0.5) == Approx(0.010).epsilon(0.045));
    CHECK(t.quantile(0.99) == Approx(0.010).epsilon(0.045));
    CHECK(t.quantile(0.995) == Approx(0.100).epsilon(0.045));
    CHECK(t.quantile(1.0) == Approx(1.534).epsilon(0.045));
    CHECK(t.longest() == 1.534);
    CHECK(t.longest_step() == 995);
    CHECK_THAT(t.text(), Catch::Contains("longest 1534 ms (global step 995)"));
    t.add(0, 1001);  // a step under a microsecond still counts
    CHECK(t.count() == 1001);
}
