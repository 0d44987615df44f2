#include "launcher/daemon_restarts.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "common/job_keys.h"
#include "common/ps_client.h"
#include "common/utf8.h"
#include "common/zmq_util.h"

namespace psrun::launcher {
namespace {

bool has(const std::vector<std::string>& argv, const char* flag) {
    return std::find(argv.begin(), argv.end(), flag) != argv.end();
}

std::optional<std::string> value_of(const std::vector<std::string>& argv, const char* flag) {
    auto it = std::find(argv.begin(), argv.end(), flag);
    if (it == argv.end() || it + 1 == argv.end()) return std::nullopt;
    return *(it + 1);
}

std::string utc_now() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", tm);
}

}  // namespace

std::string describe_wait_status(int status) {
    if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return std::string("was killed by ") + strsignal(WTERMSIG(status));
    return "stopped";
}

bool DaemonRestarts::may_restart(const DaemonCommand& command, int status) const {
    if (used(command) >= max(command)) return false;
    const auto& argv = command.argv;
    const bool training_worker =
        command.program == "workerd" && !has(argv, "--evaluator") && !has(argv, "--standalone");
    if (!training_worker && !is_ps(command)) return false;
    return WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 1);
}

int DaemonRestarts::used(const DaemonCommand& command) const {
    const std::string role = is_ps(command) ? "ps" : "worker";
    return static_cast<int>(
        std::count_if(restarts_.begin(), restarts_.end(), [&](const DaemonRestart& r) { return r.role == role; }));
}

const char* DaemonRestarts::option(const DaemonCommand& command) {
    return is_ps(command) ? "--restart-ps" : "--restart-workers";
}

const DaemonRestart& DaemonRestarts::record(const DaemonCommand& command, int status) {
    DaemonRestart r;
    r.role = is_ps(command) ? "ps" : "worker";
    r.label = command.label;
    if (auto index = value_of(command.argv, "--index")) r.index = static_cast<std::uint32_t>(std::stoul(*index));
    r.time_utc = utc_now();
    r.status = describe_wait_status(status);
    const std::size_t shards = split_endpoint_list(value_of(command.argv, "--ps").value_or("")).size();
    // A dead psd cannot answer: ask another one (psd 1 when psd 0 died), if any is left.
    const std::uint32_t ask = is_ps(command) && r.index == 0 ? 1 : 0;
    if (ask < shards) r.global_step = ask_global_step(command, ask, 2000);
    restarts_.push_back(std::move(r));
    return restarts_.back();
}

nlohmann::json DaemonRestarts::to_json() const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : restarts_) {
        // {"role": "ps", "ps": 1, ...} or {"role": "worker", "worker": 2, ...}
        nlohmann::json j = {{"role", r.role}, {r.role, r.index}, {"time", r.time_utc}, {"status", r.status}};
        j["global_step"] = r.global_step ? nlohmann::json(*r.global_step) : nlohmann::json();
        out.push_back(std::move(j));
    }
    return out;
}

Result<void> DaemonRestarts::add_to_summary(const std::string& model_dir) const {
    const std::string path = model_dir + "/summary.json";
    std::ifstream in(path);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return make_error(ErrorCode::kNotFound,
                          fmt::format("{} is missing or unreadable: restarts not recorded", path));
    j["restarts"] = to_json();
    const std::string tmp = path + ".restarts.tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << json_text(j, 2) << '\n';
        if (!out) return make_error(ErrorCode::kIo, fmt::format("cannot write {}", tmp));
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) return make_error(ErrorCode::kIo, fmt::format("cannot replace {}: {}", path, ec.message()));
    return {};
}

std::optional<std::uint64_t> ask_global_step(const DaemonCommand& daemon, std::uint32_t shard, int timeout_ms) {
    const auto ps = value_of(daemon.argv, "--ps");
    if (!ps) return std::nullopt;
    PsClientOptions o;
    o.endpoints = split_endpoint_list(*ps);
    if (o.endpoints.size() <= shard) return std::nullopt;
    o.role = wire::Role::kTool;
    o.connect_timeout = std::chrono::milliseconds(timeout_ms);
    o.heartbeat_timeout = std::chrono::milliseconds(0);
    if (auto key = value_of(daemon.argv, "--key-file")) {
        auto keys = read_job_key_file(*key);
        if (!keys) return std::nullopt;
        o.keys = *keys;
    }
    if (auto auth = value_of(daemon.argv, "--auth")) o.auth = parse_auth_mode(*auth).value_or(kDefaultAuthMode);
    try {
        PsClient client(o);
        auto stats = client.stats(shard);
        if (!stats || !stats->contains("step")) return std::nullopt;
        return (*stats)["step"].get<std::uint64_t>();
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

}  // namespace psrun::launcher
