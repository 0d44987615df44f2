// Time to targets (common/metric_targets.h): which thresholds a run is judged by, when its
// evaluations first met them, and the sentences and JSON that report it.
#include "common/metric_targets.h"

#include <catch2/catch.hpp>

using namespace psrun;
using Points = std::vector<MetricPoint>;

namespace {

const Points kRun = {{500, 0.97, 14.2}, {2500, 0.9903, 70.4}, {4500, 0.992, 125.9}, {5000, 0.9916, 140.0}};

}  // namespace

TEST_CASE("--target-accuracy takes percentages or fractions, sorted, and refuses the rest", "[targets]") {
    CHECK(*parse_target_accuracy("99,99.2") == std::vector<double>{0.99, 0.992});
    CHECK(*parse_target_accuracy("0.992, 0.99") == std::vector<double>{0.99, 0.992});
    CHECK(*parse_target_accuracy("90%,85") == std::vector<double>{0.85, 0.9});
    CHECK(*parse_target_accuracy("1") == std::vector<double>{1.0});
    CHECK(*parse_target_accuracy("99.9") == std::vector<double>{0.999});         // exactly, not 0.9990000000000001
    CHECK(*parse_target_accuracy("99,99.0,0.99") == std::vector<double>{0.99});  // duplicates go
    for (const char* bad : {"", "99,", "abc", "99x", "0", "-5", "101", "nan", "inf", "1,2,3,4,5,6,7,8,9"}) {
        INFO(bad);
        const auto r = parse_target_accuracy(bad);
        REQUIRE_FALSE(r);
        CHECK(r.error().code == ErrorCode::kInvalidArgument);
        CHECK_THAT(r.error().message, Catch::StartsWith("--target-accuracy"));
    }
    CHECK_THAT(parse_target_accuracy("99,abc").error().message, Catch::Contains("'abc' is not a number"));
    CHECK_THAT(parse_target_accuracy("101").error().message, Catch::Contains("outside (0, 100%]"));
}

TEST_CASE("MNIST keeps 99.0% and 99.2%; other data is judged against its own best", "[targets]") {
    const MetricSpec acc = accuracy_metric();
    const auto mnist = choose_targets(acc, {}, "mnist");
    CHECK(mnist.kind == TargetKind::kDefault);
    CHECK(mnist.thresholds == std::vector<double>{0.99, 0.992});
    for (const char* other : {"fashion-mnist", "files", ""}) {
        const auto c = choose_targets(acc, {}, other);
        CHECK(c.kind == TargetKind::kBest);
        CHECK(c.thresholds.empty());
    }
    const auto given = choose_targets(acc, {0.8, 0.9}, "mnist");
    CHECK(given.kind == TargetKind::kGiven);
    CHECK(given.thresholds == std::vector<double>{0.8, 0.9});
    MetricSpec mse{"test_mse", "test MSE", false, false, 0.01};
    CHECK(choose_targets(mse, {}, "mnist").kind == TargetKind::kBest);  // MNIST's defaults are accuracies
}

TEST_CASE("time to thresholds: the first evaluation at or above each", "[targets]") {
    const MetricSpec acc = accuracy_metric();
    const auto t = time_to_targets(kRun, acc, choose_targets(acc, {}, "mnist"));
    REQUIRE(t.size() == 2);
    CHECK(t[0].reached);
    CHECK(t[0].global_step == 2500);
    CHECK(*t[0].seconds == 70.4);
    CHECK(t[1].reached);
    CHECK(t[1].global_step == 4500);  // 0.992 exactly counts
    CHECK(
        describe_targets(t, acc, SecondsKind::kElapsed, 0) ==
        "time to 99.0% in 70 s (global step 2500); 99.2% in 126 s (global step 4500) (seconds since training started)");
    const auto hard = time_to_targets(kRun, acc, {{0.99, 0.995}, TargetKind::kGiven});
    CHECK_FALSE(hard[1].reached);
    CHECK(describe_targets(hard, acc, SecondsKind::kElapsed, 3000) ==
          "time to 99.0% in 70 s (global step 2500); 99.5% not reached (seconds since training resumed at global step "
          "3000)");
    const auto none = time_to_targets(kRun, acc, {{0.995, 0.999}, TargetKind::kGiven});
    CHECK(describe_targets(none, acc, SecondsKind::kElapsed, 0) ==
          "time to 99.5% and 99.9% test accuracy: neither reached");
    const auto one = time_to_targets(kRun, acc, {{0.9991}, TargetKind::kGiven});
    CHECK(describe_targets(one, acc, SecondsKind::kElapsed, 0) == "time to test accuracy 99.91%: not reached");
    CHECK(time_to_targets({}, acc, {{0.99}, TargetKind::kGiven}).empty());
}

TEST_CASE("without thresholds: time to the best and to within one point of it", "[targets]") {
    const MetricSpec acc = accuracy_metric();
    const Points fashion = {
        {200, 0.80, 5.0}, {400, 0.8612, 10.5}, {600, 0.905, 16.0}, {800, 0.9123, 21.2}, {1000, 0.911, 26.0}};
    const auto t = time_to_targets(fashion, acc, choose_targets(acc, {}, "fashion-mnist"));
    REQUIRE(t.size() == 2);
    CHECK(t[0].kind == TargetKind::kBest);
    CHECK(t[0].threshold == Approx(0.9123));
    CHECK(t[0].global_step == 800);
    CHECK(t[1].kind == TargetKind::kNearBest);
    CHECK(t[1].threshold == Approx(0.9023));
    CHECK(t[1].global_step == 600);
    CHECK(describe_targets(t, acc, SecondsKind::kTraining, 0) ==
          "time to the best test accuracy (91.23%) in 21 s (global step 800); to within 1 point of it (90.23%) in 16 s "
          "(global step 600) (seconds of training, evaluations excluded)");
}

TEST_CASE("a lower-is-better metric plugs in without a change", "[targets]") {
    const MetricSpec mse{"test_mse", "test MSE", false, false, 0.005};
    const Points points = {{100, 0.090, 3.0}, {200, 0.041, 6.0}, {300, 0.0312, 9.0}, {400, 0.0335, 12.0}};
    const auto best = time_to_targets(points, mse, choose_targets(mse, {}, "files"));
    REQUIRE(best.size() == 2);
    CHECK(best[0].threshold == Approx(0.0312));
    CHECK(best[0].global_step == 300);
    CHECK(best[1].threshold == Approx(0.0362));
    CHECK(best[1].global_step == 300);  // 0.041 is not within 0.005 of 0.0312
    CHECK(describe_targets(best, mse, SecondsKind::kElapsed, 0) ==
          "time to the best test MSE (0.0312) in 9 s (global step 300); to within 0.005 of it (0.0362) in 9 s (global "
          "step 300) (seconds since training started)");
    const auto given = time_to_targets(points, mse, {{0.05}, TargetKind::kGiven});
    CHECK(given[0].global_step == 200);
}

TEST_CASE("evaluations without a time say so", "[targets]") {
    const MetricSpec acc = accuracy_metric();
    const auto t = time_to_targets({{5000, 0.9916, std::nullopt}}, acc, {{0.99, 0.992}, TargetKind::kDefault});
    CHECK(describe_targets(t, acc, SecondsKind::kElapsed, 0) ==
          "time to 99.0%/99.2%: unknown, no evaluation record carries a time");
}

TEST_CASE("summary.json: evaluations in, targets out and back", "[targets]") {
    const MetricSpec acc = accuracy_metric();
    nlohmann::json summary = {{"evaluations",
                               {{{"global_step", 200}, {"test_accuracy", 0.95}, {"elapsed_seconds", 5.5}},
                                {{"global_step", 400}, {"loss", 0.1}},  // no accuracy: skipped
                                {{"global_step", 600}, {"test_accuracy", 0.991}, {"elapsed_seconds", 15.0}}}}};
    SecondsKind seconds = SecondsKind::kTraining;
    auto points = points_from_summary(summary, acc, seconds);
    REQUIRE(points.size() == 2);
    CHECK(seconds == SecondsKind::kElapsed);
    CHECK(points[1].global_step == 600);
    CHECK(*points[1].seconds == 15.0);

    const auto times = time_to_targets(points, acc, {{0.99, 0.992}, TargetKind::kGiven});
    const nlohmann::json j = targets_to_json(times, acc, seconds);
    CHECK(j["metric"] == nlohmann::json{{"field", "test_accuracy"}, {"higher_is_better", true}});
    CHECK(j["seconds"] == "elapsed");
    CHECK(j["targets"][0] ==
          nlohmann::json{
              {"kind", "given"}, {"threshold", 0.99}, {"reached", true}, {"global_step", 600}, {"seconds", 15.0}});
    CHECK(j["targets"][1] == nlohmann::json{{"kind", "given"}, {"threshold", 0.992}, {"reached", false}});
    summary["targets"] = j;
    CHECK(given_targets_of(summary) == std::vector<double>{0.99, 0.992});
    summary["targets"]["targets"][0]["kind"] = "default";
    CHECK(given_targets_of(summary) == std::vector<double>{0.992});
    CHECK(given_targets_of(nlohmann::json::object()).empty());

    const nlohmann::json standalone = {
        {"evaluations", {{{"global_step", 100}, {"test_accuracy", 0.9}, {"train_seconds", 2.0}}}}};
    points = points_from_summary(standalone, acc, seconds);
    CHECK(seconds == SecondsKind::kTraining);
    CHECK(*points[0].seconds == 2.0);
    CHECK(points_from_summary({{"evaluations", "junk"}}, acc, seconds).empty());
}

TEST_CASE("values print with two decimals, thresholds with one or two", "[targets]") {
    const MetricSpec acc = accuracy_metric();
    CHECK(format_metric(0.992, acc) == "99.20%");
    CHECK(format_metric(0.99316, acc) == "99.32%");
    CHECK(format_threshold(0.99, acc) == "99.0%");
    CHECK(format_threshold(0.992, acc) == "99.2%");
    CHECK(format_threshold(0.9925, acc) == "99.25%");
    CHECK(format_threshold(1.0, acc) == "100.0%");
    const MetricSpec mse{"test_mse", "test MSE", false, false, 0.005};
    CHECK(format_metric(0.031234, mse) == "0.03123");
    CHECK(format_threshold(0.005, mse) == "0.005");
}
