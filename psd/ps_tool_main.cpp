// psrun-ps: the psd-related psrun subcommands (`bench ps`, `stop`) as a standalone tool, so
// they can be built and tested before (and independently of) launcher/main.cpp. psrun
// registers the same add_*_command functions.
#include <CLI/CLI.hpp>

#include "common/result.h"
#include "common/signals.h"
#include "launcher/cmd_bench_ps.h"
#include "launcher/cmd_stop.h"

int main(int argc, char** argv) {
    psrun::block_termination_signals();
    CLI::App app{"psrun-ps: psd benchmark and standby control"};
    app.require_subcommand(1);
    int exit_code = psrun::kExitOk;
    psrun::launcher::add_bench_ps_command(app, exit_code);
    psrun::launcher::add_stop_command(app, exit_code);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? psrun::kExitOk : psrun::kExitUsage;
    }
    return exit_code;
}
