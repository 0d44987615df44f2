#include "launcher/cmd_bench_data.h"

#include <iostream>
#include <memory>

#include "common/option_checks.h"
#include "common/result.h"
#include "common/utf8.h"
#include "workerd/data/data_bench.h"
#include "workerd/data/data_options.h"

namespace psrun::launcher {

void add_bench_data_command(CLI::App& app, int& exit_code) {
    auto found = app.get_subcommands([](CLI::App* sub) { return sub->get_name() == "bench"; });
    CLI::App* bench = found.empty() ? app.add_subcommand("bench", "benchmarks") : found.front();
    bench->require_subcommand(1);
    auto o = std::make_shared<worker::DataBenchOptions>();
    auto formats = std::make_shared<std::string>();
    CLI::App* cmd =
        bench->add_subcommand("data", "decoded images per second per core for each data format (one JSON line each)");
    cmd->add_option("--shape", o->shape, "CxHxW of the synthetic images")->capture_default_str();
    cmd->add_option("--target", o->target, "CxHxW to decode them to (default: --shape, no resizing)");
    cmd->add_option("--images", o->images, "distinct images per format")
        ->check(integer_in(1, 1000000))
        ->capture_default_str();
    cmd->add_option("--quality", o->quality, "JPEG quality")->check(integer_in(1, 100))->capture_default_str();
    cmd->add_option("--seconds", o->seconds, "seconds per measurement")
        ->check(number_above(0, 3600, "seconds"))
        ->capture_default_str();
    cmd->add_option("--threads", o->threads, "decoding threads of the stream measurement")
        ->check(thread_count(1))
        ->capture_default_str();
    cmd->add_option("--formats", *formats,
                    "comma list of jpeg-decode, jpeg, png, tfrecord-jpeg, tfrecord-png, idx, stream-tfrecord-jpeg "
                    "(default: all)");
    cmd->add_option("--image", o->image, "decode this image file repeatedly instead (e.g. the one given to tjbench)");
    cmd->add_option("--save-samples", o->save_samples, "write sample.jpg and sample.png of the set to this directory");
    cmd->callback([o, formats, &exit_code] {
        if (!formats->empty()) o->formats = worker::split_list(*formats);
        auto lines = worker::run_data_benchmark(*o);
        if (!lines) {
            std::cerr << "psrun bench data: " << lines.error().message << "\n";
            exit_code = lines.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure;
            return;
        }
        for (const auto& j : *lines) std::cout << json_text(j) << "\n";
        std::cout << std::flush;
        exit_code = kExitOk;
    });
}

}  // namespace psrun::launcher
