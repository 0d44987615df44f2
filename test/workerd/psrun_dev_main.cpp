// DEV DRIVER, not part of the product: a minimal CLI11 main that mounts only the compute
// helper's psrun subcommands (`data fetch`, `bench train`) so they can be run and tested before
// launcher/main.cpp wires them. Remove once `psrun` itself calls add_data_command() and
// add_bench_train_command().
#include <CLI/CLI.hpp>

#include "launcher/cmd_bench_train.h"
#include "launcher/cmd_data.h"

int main(int argc, char** argv) {
    CLI::App app{"psrun_dev: psrun's data fetch and bench train subcommands"};
    app.require_subcommand(1);
    int exit_code = 0;
    psrun::launcher::add_data_command(app, exit_code);
    psrun::launcher::add_bench_train_command(app, exit_code);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    return exit_code;
}
