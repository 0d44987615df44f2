#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/metrics_log.h"

namespace fs = std::filesystem;

TEST_CASE("metrics are JSON lines and plot to a PNG", "[metrics]") {
    std::string tmpl = (fs::temp_directory_path() / "psrun-metrics-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    const fs::path dir = tmpl;
    const auto path = (dir / "metrics.jsonl").string();
    {
        psrun::MetricsLog log(path);
        for (int step = 100; step <= 1000; step += 100)
            log.write(step, {{"loss", 2.0 / step}, {"images_per_sec", 1000.0}});
        log.write(1000, {{"test_accuracy", 0.97}});
    }
    std::ifstream in(path);
    int lines = 0;
    for (std::string line; std::getline(in, line); ++lines) {
        const auto j = nlohmann::json::parse(line);
        CHECK(j.contains("step"));
        CHECK(j["time"].get<double>() > 1.6e9);
    }
    CHECK(lines == 11);

    const auto png = (dir / "curves.png").string();
    std::string said = "unset";
    auto plotted = psrun::plot_curves(path, png, &said);
    REQUIRE(plotted);
    // One evaluation (a flat accuracy series) and a log loss axis: gnuplot has nothing to warn about
    // (it used to print "Warning: empty y2 range" into the job's log).
    CHECK(said.empty());
    REQUIRE(fs::exists(png));
    std::ifstream img(png, std::ios::binary);
    char magic[8] = {};
    img.read(magic, 8);
    CHECK(std::string(magic + 1, 3) == "PNG");
    CHECK_FALSE(fs::exists(png + ".loss.dat"));
    CHECK_FALSE(fs::exists(png + ".gnuplot.log"));

    SECTION("nothing to plot is an error, not a crash") {
        const auto empty = (dir / "empty.jsonl").string();
        std::ofstream(empty) << "{\"step\": 1}\nnot json\n";
        CHECK_FALSE(psrun::plot_curves(empty, (dir / "none.png").string()));
    }
    fs::remove_all(dir);
}
