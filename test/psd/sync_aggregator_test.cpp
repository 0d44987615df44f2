#include "psd/sync_aggregator.h"

#include <catch2/catch.hpp>

#include <thread>

using psrun::psd::SyncAggregator;

TEST_CASE("sync aggregator averages N gradients and reports the straggler", "[psd][sync]") {
    SyncAggregator agg(4, 3, 2, 2);  // 4 floats, 3 workers, average 2, report every 2 steps
    const std::vector<std::size_t> offsets = {0, 3};
    std::vector<float> a = {1, 2, 3, 4}, b = {3, 4, 5, 6};
    auto spans = [&](std::vector<float>& v) {
        return std::vector<std::span<const float>>{std::span<const float>(v.data(), 3),
                                                   std::span<const float>(v.data() + 3, 1)};
    };
    for (int step = 0; step < 2; ++step) {
        CHECK_FALSE(agg.add(0, spans(a), offsets));
        CHECK(agg.contributed(0));
        CHECK_FALSE(agg.contributed(2));
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        CHECK(agg.add(2, spans(b), offsets));  // worker 2 completes the step, last
        auto avg = agg.average(spans(a), offsets);
        REQUIRE(avg.size() == 2);
        CHECK(avg[0][0] == 2.0f);
        CHECK(avg[0][2] == 4.0f);
        CHECK(avg[1][0] == 5.0f);
        auto report = agg.finish_step(static_cast<std::uint64_t>(step + 1));
        CHECK_FALSE(agg.contributed(0));
        if (step == 0) {
            CHECK_FALSE(report);
        } else {
            REQUIRE(report);
            CHECK_THAT(*report, Catch::Contains("worker 2 completed 2 of the last 2 steps"));
        }
    }
}
