#include "launcher/tf_cluster.h"

#include <fmt/format.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

namespace psrun::launcher {
namespace {

auto invalid(std::string message) { return make_error(ErrorCode::kInvalidArgument, std::move(message)); }

std::string host_of(const std::string& address) { return address.substr(0, address.rfind(':')); }

// Builds the map once the role lists and the caller's (role, index) are known.
Result<ClusterMap> assemble(std::vector<std::string> ps, std::vector<std::string> worker,
                            std::vector<std::string> evaluator, Role self_role, int self_index,
                            const std::string& source) {
    std::set<std::string> seen;
    for (const auto* list : {&ps, &worker, &evaluator})
        for (const std::string& a : *list)
            if (!a.empty() && !seen.insert(a).second)
                return invalid(fmt::format("{}: address {} is listed twice", source, a));
    ClusterMap map;
    map.source = source;
    int rank = 0;
    auto add = [&](const std::vector<std::string>& list, Role role) {
        for (size_t i = 0; i < list.size(); ++i)
            map.slots.push_back(TaskSlot{rank++, host_of(list[i]), -1, role, static_cast<int>(i),
                                         role == Role::kWorker && i == 0, list[i]});
    };
    add(ps, Role::kPs);
    add(worker, Role::kWorker);
    add(evaluator, Role::kEvaluator);
    map.ps = std::move(ps);
    map.worker = std::move(worker);
    map.evaluator = std::move(evaluator);
    map.chief_index = 0;
    const int offset = self_role == Role::kPs       ? 0
                       : self_role == Role::kWorker ? static_cast<int>(map.ps.size())
                                                    : static_cast<int>(map.ps.size() + map.worker.size());
    SelfInfo self;
    self.rank = offset + self_index;
    self.role = self_role;
    self.index = self_index;
    const std::vector<std::string>& own = self_role == Role::kPs       ? map.ps
                                          : self_role == Role::kWorker ? map.worker
                                                                       : map.evaluator;
    self.node =
        static_cast<size_t>(self_index) < own.size() ? host_of(own[static_cast<size_t>(self_index)]) : std::string();
    map.self = self;
    if (std::string why = map.validate(); !why.empty()) return invalid(fmt::format("{}: {}", source, why));
    return map;
}

Result<std::vector<std::string>> split_hosts(const std::string& text, const std::string& flag) {
    std::vector<std::string> out;
    if (text.empty()) return out;
    size_t pos = 0;
    while (true) {
        const size_t comma = text.find(',', pos);
        std::string item = text.substr(pos, comma == std::string::npos ? comma : comma - pos);
        PSRUN_TRY(check_host_port(item, flag));
        out.push_back(std::move(item));
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

}  // namespace

Result<void> check_host_port(const std::string& address, const std::string& what) {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0)
        return invalid(fmt::format("{}: '{}' is not host:port", what, address));
    const std::string host = address.substr(0, colon);
    const std::string port = address.substr(colon + 1);
    if (host.find_first_of(":/ ") != std::string::npos)
        return invalid(fmt::format("{}: '{}' has a malformed host", what, address));
    long p = port.empty() || port.size() > 5 ? -1 : 0;
    for (char c : port) p = std::isdigit(static_cast<unsigned char>(c)) && p >= 0 ? p * 10 + (c - '0') : -1;
    if (p < 1 || p > 65535) return invalid(fmt::format("{}: '{}' has no valid port (1-65535)", what, address));
    return {};
}

Result<ClusterMap> map_from_tf_flags(const TfFlags& flags) {
    PSRUN_TRY_ASSIGN(auto ps, split_hosts(flags.ps_hosts, "--ps_hosts"));
    PSRUN_TRY_ASSIGN(auto worker, split_hosts(flags.worker_hosts, "--worker_hosts"));
    if (worker.empty()) return invalid("--worker_hosts is required with the TF-style flags");
    if (flags.job_name != "ps" && flags.job_name != "worker")
        return invalid(fmt::format("--job_name '{}': expected ps or worker", flags.job_name));
    if (!flags.task_index) return invalid("--task_index is required with the TF-style flags");
    const Role role = flags.job_name == "ps" ? Role::kPs : Role::kWorker;
    const size_t n = role == Role::kPs ? ps.size() : worker.size();
    if (*flags.task_index < 0 || static_cast<size_t>(*flags.task_index) >= n)
        return invalid(fmt::format("--task_index {} is out of range: --{}_hosts lists {} hosts", *flags.task_index,
                                   flags.job_name, n));
    return assemble(std::move(ps), std::move(worker), {}, role, *flags.task_index, "flags");
}

Result<ClusterMap> map_from_tf_config(const std::string& text) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) return invalid("TF_CONFIG is not valid JSON");
    if (!j.is_object()) return invalid("TF_CONFIG must be a JSON object");
    if (!j.contains("cluster") || !j["cluster"].is_object())
        return invalid("TF_CONFIG.cluster is missing or not an object");
    const nlohmann::json& cluster = j["cluster"];
    std::vector<std::string> lists[4];  // chief, ps, worker, evaluator
    const char* names[4] = {"chief", "ps", "worker", "evaluator"};
    for (const auto& [key, value] : cluster.items()) {
        int which = -1;
        for (int i = 0; i < 4; ++i)
            if (key == names[i]) which = i;
        if (which < 0)
            return invalid(
                fmt::format("TF_CONFIG.cluster.{}: unknown job (expected chief, ps, "
                            "worker, evaluator)",
                            key));
        if (!value.is_array())
            return invalid(fmt::format("TF_CONFIG.cluster.{} must be an array of \"host:port\"", key));
        for (size_t i = 0; i < value.size(); ++i) {
            const std::string field = fmt::format("TF_CONFIG.cluster.{}[{}]", key, i);
            if (!value[i].is_string()) return invalid(field + " must be a \"host:port\" string");
            const std::string address = value[i].get<std::string>();
            PSRUN_TRY(check_host_port(address, field));
            lists[which].push_back(address);
        }
    }
    if (lists[0].size() > 1)
        return invalid(fmt::format("TF_CONFIG.cluster.chief lists {} hosts; at most one", lists[0].size()));
    if (!j.contains("task") || !j["task"].is_object()) return invalid("TF_CONFIG.task is missing or not an object");
    const nlohmann::json& task = j["task"];
    if (!task.contains("type") || !task["type"].is_string())
        return invalid("TF_CONFIG.task.type is missing or not a string");
    if (!task.contains("index") || !task["index"].is_number_integer())
        return invalid("TF_CONFIG.task.index is missing or not an integer");
    const std::string type = task["type"].get<std::string>();
    const long long index = task["index"].get<long long>();
    int which = -1;
    for (int i = 0; i < 4; ++i)
        if (type == names[i]) which = i;
    if (which < 0)
        return invalid(
            fmt::format("TF_CONFIG.task.type '{}': expected chief, ps, worker or "
                        "evaluator",
                        type));
    // TF lists no address for an evaluator; allow index 0 of an absent evaluator list.
    const size_t limit = which == 3 && lists[3].empty() ? 1 : lists[which].size();
    if (index < 0 || static_cast<size_t>(index) >= limit)
        return invalid(
            fmt::format("TF_CONFIG.task.index {} is out of range: cluster.{} has {} "
                        "entries",
                        index, type, lists[which].size()));
    std::vector<std::string> worker = lists[0];  // the named chief becomes worker 0
    worker.insert(worker.end(), lists[2].begin(), lists[2].end());
    if (worker.empty()) return invalid("TF_CONFIG.cluster has no chief and no worker");
    std::vector<std::string> evaluator = lists[3];
    if (which == 3 && evaluator.empty()) evaluator.push_back("");
    Role role = Role::kWorker;
    int self_index = static_cast<int>(index);
    if (which == 1) role = Role::kPs;
    if (which == 3) role = Role::kEvaluator;
    if (which == 2) self_index += static_cast<int>(lists[0].size());
    return assemble(lists[1], std::move(worker), std::move(evaluator), role, self_index, "TF_CONFIG");
}

}  // namespace psrun::launcher
