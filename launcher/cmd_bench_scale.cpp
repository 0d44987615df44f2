#include "launcher/cmd_bench_scale.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#include "launcher/cmd_bench_ps.h"

namespace psrun::launcher {

std::optional<std::string> find_scale_script() {
    const char* dir = std::getenv("PSRUN_BENCH_DIR");
    const std::filesystem::path script = dir && *dir ? std::filesystem::path(dir) / "scale.py"
                                                     : std::filesystem::path(PSRUN_SOURCE_ROOT) / "bench" / "scale.py";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(script, ec)) return std::nullopt;
    return script.string();
}

void add_bench_scale_command(CLI::App& app, int& exit_code) {
    auto* cmd = bench_subcommand(app)->add_subcommand(
        "scale",
        "workers x psd shards on an emulated cluster against the analytic model (bench/scale.py; "
        "`psrun bench scale --help` shows its options)");
    cmd->set_help_flag();  // --help is the script's
    cmd->prefix_command();
    cmd->callback([cmd, &exit_code] {
        const auto script = find_scale_script();
        if (!script) {
            std::cerr << "bench scale: no scale.py in "
                      << (std::getenv("PSRUN_BENCH_DIR") ? "$PSRUN_BENCH_DIR" : PSRUN_SOURCE_ROOT "/bench")
                      << ": set PSRUN_BENCH_DIR to the bench/ folder of a psrun source tree\n";
            exit_code = 2;
            return;
        }
        std::error_code ec;
        const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
        std::vector<std::string> args = {"python3", *script, "--psrun", self};
        for (const auto& a : cmd->remaining()) args.push_back(a);
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::cout.flush();
        ::execvp("python3", argv.data());
        std::cerr << "bench scale: cannot run python3: " << std::strerror(errno) << "\n";
        exit_code = 2;
    });
}

}  // namespace psrun::launcher
