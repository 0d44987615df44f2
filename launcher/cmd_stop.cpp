#include "launcher/cmd_stop.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>
#include <thread>

#include "common/job_keys.h"
#include "common/option_checks.h"
#include "common/ps_client.h"

namespace psrun::launcher {
namespace {

struct StopOptions {
    std::string model_dir;
    std::string key_file;
    bool no_auth = false;
    std::string auth{to_string(kDefaultAuthMode)};
    double timeout_s = 60;
};

int run_stop(const StopOptions& o) {
    namespace fs = std::filesystem;
    std::error_code ec;
    std::vector<fs::path> files;
    const std::regex name("ps-[0-9]+\\.endpoint");
    for (const auto& e : fs::directory_iterator(o.model_dir, ec))
        if (std::regex_match(e.path().filename().string(), name)) files.push_back(e.path());
    if (files.empty()) {
        std::cerr << "stop: no ps-<i>.endpoint file in " << o.model_dir
                  << ": is a standby psd running with --model-dir " << o.model_dir << "?\n";
        return kExitUsage;
    }
    std::optional<JobKeys> keys;
    if (!o.no_auth) {
        const std::string path = o.key_file.empty() ? default_job_key_path(o.model_dir, "") : o.key_file;
        auto k = read_job_key_file(path);
        if (!k) {
            std::cerr << "stop: " << k.error().message << " (give --key-file F, or --no-auth for a psd without auth)\n";
            return kExitUsage;
        }
        keys = *k;
    }
    int failures = 0;
    std::vector<std::pair<fs::path, std::string>> asked;
    for (const auto& f : files) {
        std::string endpoint;
        std::ifstream(f) >> endpoint;
        PsClientOptions co;
        co.endpoints = {endpoint};
        co.role = wire::Role::kTool;
        co.keys = keys;
        co.auth = parse_auth_mode(o.auth).value_or(kDefaultAuthMode);
        co.connect_timeout = seconds_to_ms(o.timeout_s);
        try {
            PsClient client(co);
            if (auto r = client.stop(0); !r) {
                std::cerr << "stop: " << f.filename().string() << " (" << endpoint << "): " << r.error().message
                          << "\n";
                ++failures;
                continue;
            }
        } catch (const std::exception& e) {
            std::cerr << "stop: " << f.filename().string() << ": bad endpoint '" << endpoint << "': " << e.what()
                      << "\n";
            ++failures;
            continue;
        }
        asked.emplace_back(f, endpoint);
    }
    // psd removes its endpoint file after saving its shard: wait for that.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.timeout_s);
    for (const auto& [file, endpoint] : asked) {
        while (fs::exists(file) && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (fs::exists(file)) {
            std::cerr << "stop: " << endpoint << " acknowledged STOP but did not exit within " << o.timeout_s << " s\n";
            ++failures;
        } else {
            std::cout << "stopped " << file.stem().string() << " (" << endpoint << "), shard saved\n";
        }
    }
    return failures == 0 ? kExitOk : kExitFailure;
}

}  // namespace

void add_stop_command(CLI::App& app, int& exit_code) {
    auto opts = std::make_shared<StopOptions>();
    auto* cmd = app.add_subcommand("stop", "save and stop the standby parameter servers of a model dir");
    cmd->add_option("--model-dir", opts->model_dir, "the model dir the standby psds were started with")
        ->required()
        ->check(CLI::ExistingDirectory);
    auto* key =
        cmd->add_option("--key-file", opts->key_file, "the job's key file (default: <model-dir>/.psrun/job.key)");
    auto* no_auth = cmd->add_flag("--no-auth", opts->no_auth, "the psds run without authentication")->excludes(key);
    cmd->add_option("--auth", opts->auth, "the psds' --auth: mac or curve")
        ->check(CLI::IsMember({"mac", "curve"}))
        ->excludes(no_auth)
        ->capture_default_str();
    cmd->add_option("--timeout", opts->timeout_s, "seconds to wait for each psd")->check(positive_seconds());
    cmd->callback([opts, &exit_code] { exit_code = run_stop(*opts); });
}

}  // namespace psrun::launcher
