#include "launcher/daemon_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>

namespace psrun::launcher {
namespace {

std::string join_endpoints(const std::vector<std::string>& addresses) {
    std::string out;
    for (const std::string& a : addresses) {
        if (!out.empty()) out += ',';
        out += to_endpoint(a);
    }
    return out;
}

}  // namespace

std::optional<std::string> training_model_dir(const std::vector<std::string>& training) {
    for (size_t i = 0; i < training.size(); ++i) {
        if (training[i] == "--model-dir" && i + 1 < training.size()) return training[i + 1];
        if (training[i].rfind("--model-dir=", 0) == 0) return training[i].substr(12);
    }
    return std::nullopt;
}

std::optional<std::string> training_value(const std::vector<std::string>& training, const std::string& name) {
    std::optional<std::string> value;
    for (size_t i = 0; i < training.size(); ++i) {
        if (training[i] == name && i + 1 < training.size()) value = training[i + 1];
        if (training[i].rfind(name + "=", 0) == 0) value = training[i].substr(name.size() + 1);
    }
    return value;
}

std::optional<int> training_threads(const std::vector<std::string>& training) {
    std::optional<int> threads;
    auto parse = [&](const std::string& value) {
        int n = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec == std::errc() && end == value.data() + value.size() && n > 0) threads = n;
    };
    for (size_t i = 0; i < training.size(); ++i) {
        if (training[i] == "--threads" && i + 1 < training.size()) parse(training[i + 1]);
        if (training[i].rfind("--threads=", 0) == 0) parse(training[i].substr(10));
    }
    return threads;
}

Result<DaemonCommand> daemon_command(const ClusterMap& map, Role role, int index, const DaemonOptions& options) {
    DaemonCommand cmd;
    const std::string num_workers = std::to_string(map.worker.size());
    auto add_auth = [&] {
        if (!options.key_file.empty()) {
            cmd.argv.insert(cmd.argv.end(), {"--key-file", options.key_file});
            if (!options.auth.empty()) cmd.argv.insert(cmd.argv.end(), {"--auth", options.auth});
        } else if (options.no_auth) {
            cmd.argv.push_back("--no-auth");
        }
    };
    auto add_run_id = [&] {
        if (!options.run_id.empty()) cmd.argv.insert(cmd.argv.end(), {"--run-id", options.run_id});
    };
    auto add_threads = [&] {
        const std::optional<int> threads = role == Role::kPs && options.ps_threads ? options.ps_threads : map.threads;
        if (threads) cmd.argv.insert(cmd.argv.end(), {"--threads", std::to_string(*threads)});
    };
    if (role == Role::kPs) {
        cmd.label = fmt::format("ps {}", index);
        cmd.program = "psd";
        cmd.argv = {"psd",           "--index",  std::to_string(index), "--ps", join_endpoints(map.ps),
                    "--num-workers", num_workers};
        if (auto dir = training_model_dir(options.training)) cmd.argv.insert(cmd.argv.end(), {"--model-dir", *dir});
        // One drain budget for psd and the chief (common/drain_budget.h): the workers' value.
        if (auto grace = training_value(options.training, "--signal-grace"))
            cmd.argv.insert(cmd.argv.end(), {"--signal-grace", *grace});
        add_auth();
        if (options.standby) cmd.argv.push_back("--standby");
        if (options.worker_timeout)
            cmd.argv.insert(cmd.argv.end(), {"--worker-timeout", fmt::format("{}", *options.worker_timeout)});
        if (options.max_bad_grads)
            cmd.argv.insert(cmd.argv.end(), {"--max-bad-grads", std::to_string(*options.max_bad_grads)});
        if (options.min_workers)
            cmd.argv.insert(cmd.argv.end(), {"--min-workers", std::to_string(*options.min_workers)});
        if (options.max_workers) {
            if (*options.max_workers < static_cast<int>(map.worker.size()))
                return make_error(ErrorCode::kInvalidArgument,
                                  fmt::format("--max-workers {} is below the {} workers of the map: give at least that "
                                              "many (the workers that may join come on top)",
                                              *options.max_workers, map.worker.size()));
            cmd.argv.insert(cmd.argv.end(), {"--max-workers", std::to_string(*options.max_workers)});
        }
        if (options.max_staleness)
            cmd.argv.insert(cmd.argv.end(), {"--max-staleness", std::to_string(*options.max_staleness)});
        if (!options.checkpoint_writer.empty())
            cmd.argv.insert(cmd.argv.end(), {"--checkpoint-writer", options.checkpoint_writer});
        if (options.checkpoint_full_every)
            cmd.argv.insert(cmd.argv.end(),
                            {"--checkpoint-full-every", std::to_string(*options.checkpoint_full_every)});
        if (options.reconnect_wait)
            cmd.argv.insert(cmd.argv.end(), {"--reconnect-wait", fmt::format("{}", *options.reconnect_wait)});
        if (options.sync) {
            cmd.argv.push_back("--sync");
            cmd.argv.insert(
                cmd.argv.end(),
                {"--replicas-to-aggregate",
                 std::to_string(options.replicas_to_aggregate.value_or(static_cast<int>(map.worker.size())))});
            if (options.backup_workers)
                cmd.argv.insert(cmd.argv.end(), {"--backup-workers", std::to_string(*options.backup_workers)});
            if (options.async_tables) cmd.argv.push_back("--async-tables");
        }
        add_threads();
        if (!options.log_level.empty()) cmd.argv.insert(cmd.argv.end(), {"--log-level", options.log_level});
        add_run_id();
        return cmd;
    }
    cmd.program = "workerd";
    if (map.ps.empty()) {
        if (role != Role::kWorker || map.worker.size() != 1 || !map.evaluator.empty())
            return make_error(ErrorCode::kInvalidArgument,
                              fmt::format("the map has no parameter server but {} workers and {} "
                                          "evaluators: without ps only one worker can run "
                                          "(standalone); add --ps 1 or more",
                                          map.worker.size(), map.evaluator.size()));
        cmd.label = "standalone worker";
        cmd.argv = {"workerd", "--standalone"};
        add_threads();
        add_run_id();
        cmd.argv.insert(cmd.argv.end(), options.training.begin(), options.training.end());
        return cmd;
    }
    cmd.label = fmt::format("{} {}", role_name(role), index);
    cmd.argv = {"workerd",       "--index",  std::to_string(index), "--ps", join_endpoints(map.ps),
                "--num-workers", num_workers};
    if (role == Role::kWorker && index == map.chief_index) cmd.argv.push_back("--chief");
    if (role == Role::kEvaluator) cmd.argv.push_back("--evaluator");
    add_auth();
    if (options.reconnect_wait && role != Role::kEvaluator)
        cmd.argv.insert(cmd.argv.end(), {"--reconnect-wait", fmt::format("{}", *options.reconnect_wait)});
    add_threads();
    add_run_id();
    cmd.argv.insert(cmd.argv.end(), options.training.begin(), options.training.end());
    return cmd;
}

std::string bin_dir_for(const std::string& program, const DaemonOptions& options, const EnvMap& env) {
    if (!options.bin_dir.empty()) return options.bin_dir;
    if (auto dir = env_get(env, "PSRUN_BIN_DIR"); dir && !dir->empty()) return *dir;
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return ".";
    const auto dir = self.parent_path();
    const auto build_tree = dir.parent_path() / program;
    if (std::filesystem::exists(build_tree / program, ec)) return build_tree.string();
    return dir.string();
}

Result<std::string> daemon_path(const std::string& program, const DaemonOptions& options, const EnvMap& env) {
    const std::string dir = bin_dir_for(program, options, env);
    const std::string path = dir + "/" + program;
    if (::access(path.c_str(), X_OK) == 0) return path;
    std::string where = path;
    const bool explicit_dir = !options.bin_dir.empty() || env_get(env, "PSRUN_BIN_DIR");
    if (!explicit_dir)  // say both places next to psrun that were tried
        where = fmt::format("{}/../{}/{} or {}", dir, program, program, path);
    return make_error(ErrorCode::kNotFound, fmt::format("{} not found or not executable at {}: build it (ninja -C "
                                                        "build) or point --bin-dir / PSRUN_BIN_DIR at the directory "
                                                        "that holds psd and workerd",
                                                        program, where));
}

std::string render_argv(const std::vector<std::string>& argv) {
    std::string out;
    for (const std::string& a : argv) {
        if (!out.empty()) out += ' ';
        const bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos;
        out += plain ? a : "'" + a + "'";
    }
    return out;
}

}  // namespace psrun::launcher
