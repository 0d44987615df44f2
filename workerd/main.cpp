// workerd: the worker daemon. Standalone training runs here; the distributed mode (--ps) is wired
// to psd by the distributed issue.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <exception>

#include "common/logging.h"
#include "common/result.h"
#include "common/signals.h"
#include "workerd/standalone.h"

int main(int argc, char** argv) {
    psrun::block_termination_signals();
    CLI::App app{"workerd: trains TF's mnist_deep CNN on oneDNN (standalone or with psd)"};
    psrun::worker::TrainOptions options;
    bool standalone = false;
    int index = 0;
    std::string log_level = "info";
    app.add_flag("--standalone", standalone, "train alone with the local optimizer (no psd)");
    app.add_option("--index", index, "worker index");
    app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
    psrun::worker::add_train_options(app, options);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? psrun::kExitOk : psrun::kExitUsage;
    }
    psrun::init_logging("workerd", index, log_level);
    try {
        if (!standalone) {
            throw psrun::UsageError(
                "only --standalone is implemented so far (distributed mode with --ps comes with "
                "the distributed issue)");
        }
        return psrun::worker::StandaloneTrainer(options).run();
    } catch (const psrun::UsageError& e) {
        spdlog::error("{}", e.what());
        return psrun::kExitUsage;
    } catch (const std::exception& e) {
        spdlog::error("{}", e.what());
        return psrun::kExitFailure;
    }
}
