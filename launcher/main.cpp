// psrun: from a Slurm job step, TF_CONFIG, TF-style flags or a local run to one validated
// cluster map, then to daemons with explicit flags (docs/architecture.md).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "common/denormals.h"
#include "common/logging.h"
#include "common/option_checks.h"
#include "common/result.h"
#include "launcher/cmd_bench_cluster.h"
#include "launcher/cmd_bench_data.h"
#include "launcher/cmd_bench_ps.h"
#include "launcher/cmd_bench_scale.h"
#include "launcher/cmd_bench_train.h"
#include "launcher/cmd_data.h"
#include "launcher/cmd_doctor.h"
#include "launcher/cmd_eval.h"
#include "launcher/cmd_export.h"
#include "launcher/cmd_join.h"
#include "launcher/cmd_local.h"
#include "launcher/cmd_model.h"
#include "launcher/cmd_plan.h"
#include "launcher/cmd_predict.h"
#include "launcher/cmd_run.h"
#include "launcher/cmd_stop.h"
#include "launcher/command_context.h"
#include "launcher/option_advice.h"
#include "launcher/thread_plan.h"

int main(int argc, char** argv) {
    psrun::flush_denormals_to_zero();  // before any thread: they inherit it (common/denormals.h)
    psrun::init_logging("psrun", -1, "info");
    psrun::launcher::CommandContext ctx;
    ctx.env = psrun::launcher::env_from_environ(environ);
    ctx.affinity_cpus = psrun::launcher::affinity_cpu_count();
    // For run and local, everything after the first "--" is training options for workerd and
    // CLI11 never sees it; other subcommands get their argv unchanged.
    std::vector<std::string> args(argv + 1, argv + argc);
    const bool takes_training = !args.empty() && (args[0] == "run" || args[0] == "local" || args[0] == "join");
    if (const auto dash = std::find(args.begin(), args.end(), "--"); takes_training && dash != args.end()) {
        ctx.training.assign(dash + 1, args.end());
        args.erase(dash, args.end());
    }
    std::reverse(args.begin(), args.end());  // CLI11's vector form expects reverse order

    CLI::App app("psrun: parameter-server training on Slurm", "psrun");
    app.require_subcommand(1);
    psrun::launcher::add_plan_command(app, ctx);
    psrun::launcher::add_run_command(app, ctx);
    psrun::launcher::add_local_command(app, ctx);
    psrun::launcher::add_join_command(app, ctx);
    psrun::launcher::add_addr_command(app, ctx);
    psrun::launcher::add_stop_command(app, ctx.exit_code);
    psrun::launcher::add_data_command(app, ctx.exit_code);
    psrun::launcher::add_doctor_command(app, ctx.exit_code);
    psrun::launcher::add_model_command(app, ctx.exit_code);
    psrun::launcher::add_eval_command(app, ctx.exit_code);
    psrun::launcher::add_predict_command(app, ctx.exit_code);
    psrun::launcher::add_export_command(app, ctx.exit_code);
    psrun::launcher::add_bench_train_command(app, ctx.exit_code);
    psrun::launcher::add_bench_ps_command(app, ctx.exit_code);
    psrun::launcher::add_bench_cluster_command(app, ctx.exit_code);
    psrun::launcher::add_bench_scale_command(app, ctx.exit_code);
    psrun::launcher::add_bench_data_command(app, ctx.exit_code);
    if (psrun::wants_numeric_option_list(argc, argv)) {
        psrun::print_numeric_options(app, std::cout);
        return psrun::kExitOk;
    }
    try {
        // A psrun option among the training options would reach workerd, which refuses it.
        if (takes_training) {
            if (auto misplaced =
                    psrun::launcher::misplaced_option_message(*app.get_subcommand(args.back()), ctx.training))
                throw psrun::UsageError(*misplaced);
        }
        app.parse(args);
        return ctx.exit_code;
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ExtrasError& e) {
        // An unknown option of a subcommand: name the closest known one and the usage.
        const auto subs = app.get_subcommands();
        if (!subs.empty()) {
            if (auto message = psrun::launcher::unknown_option_message(*subs.front(), app.remaining(true))) {
                std::cerr << "psrun: error: " << *message << std::endl;
                return psrun::kExitUsage;
            }
        }
        app.exit(e);
        return psrun::kExitUsage;
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return psrun::kExitUsage;
    } catch (const psrun::UsageError& e) {
        std::cerr << "psrun: error: " << e.what() << std::endl;
        return psrun::kExitUsage;
    } catch (const std::exception& e) {
        std::cerr << "psrun: error: " << e.what() << std::endl;
        return psrun::kExitFailure;
    }
}
