#include "launcher/worker_restarts.h"

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
#include "common/zmq_util.h"
#include "common/utf8.h"

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

bool WorkerRestarts::may_restart(const DaemonCommand& command, int status) const {
    if (static_cast<int>(restarts_.size()) >= max_) return false;
    const auto& argv = command.argv;
    if (command.program != "workerd" || has(argv, "--evaluator") || has(argv, "--standalone")) return false;
    return WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 1);
}

const WorkerRestart& WorkerRestarts::record(const DaemonCommand& command, int status) {
    WorkerRestart r;
    r.worker = command.label;
    if (auto index = value_of(command.argv, "--index")) r.index = static_cast<std::uint32_t>(std::stoul(*index));
    r.time_utc = utc_now();
    r.status = describe_wait_status(status);
    r.global_step = ask_global_step(command, 2000);
    restarts_.push_back(std::move(r));
    return restarts_.back();
}

nlohmann::json WorkerRestarts::to_json() const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : restarts_) {
        nlohmann::json j = {{"worker", r.index}, {"time", r.time_utc}, {"status", r.status}};
        j["global_step"] = r.global_step ? nlohmann::json(*r.global_step) : nlohmann::json();
        out.push_back(std::move(j));
    }
    return out;
}

Result<void> WorkerRestarts::add_to_summary(const std::string& model_dir) const {
    const std::string path = model_dir + "/summary.json";
    std::ifstream in(path);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return make_error(ErrorCode::kNotFound, fmt::format("{} is missing or unreadable: restarts not recorded", path));
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

std::optional<std::uint64_t> ask_global_step(const DaemonCommand& worker, int timeout_ms) {
    const auto ps = value_of(worker.argv, "--ps");
    if (!ps) return std::nullopt;
    PsClientOptions o;
    o.endpoints = split_endpoint_list(*ps);
    if (o.endpoints.empty()) return std::nullopt;
    o.role = wire::Role::kTool;
    o.connect_timeout = std::chrono::milliseconds(timeout_ms);
    o.heartbeat_timeout = std::chrono::milliseconds(0);
    if (auto key = value_of(worker.argv, "--key-file")) {
        auto keys = read_job_key_file(*key);
        if (!keys) return std::nullopt;
        o.keys = *keys;
    }
    if (auto auth = value_of(worker.argv, "--auth")) o.auth = parse_auth_mode(*auth).value_or(kDefaultAuthMode);
    try {
        PsClient client(o);
        auto stats = client.stats(0);
        if (!stats || !stats->contains("step")) return std::nullopt;
        return (*stats)["step"].get<std::uint64_t>();
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

}  // namespace psrun::launcher
