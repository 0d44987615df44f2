#include "common/cluster_map.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <sstream>

namespace psrun {

const char* role_name(Role role) {
    switch (role) {
        case Role::kPs: return "ps";
        case Role::kWorker: return "worker";
        case Role::kEvaluator: return "evaluator";
    }
    return "?";
}

nlohmann::ordered_json ClusterMap::to_json() const {
    nlohmann::ordered_json j;
    j["ps"] = ps;
    j["worker"] = worker;
    j["chief"] = worker.empty() ? std::string() : chief();
    if (self) {
        nlohmann::ordered_json s;
        s["rank"] = self->rank;
        s["role"] = role_name(self->role);
        s["index"] = self->index;
        s["node"] = self->node;
        s["chief"] = self->role == Role::kWorker && self->index == chief_index;
        const std::vector<std::string>& list = self->role == Role::kPs       ? ps
                                               : self->role == Role::kWorker ? worker
                                                                             : evaluator;
        s["address"] =
            static_cast<size_t>(self->index) < list.size() ? list[static_cast<size_t>(self->index)] : std::string();
        if (self->procid) s["procid"] = *self->procid;
        else s["procid"] = nullptr;
        j["self"] = std::move(s);
    }
    j["evaluator"] = evaluator;
    j["source"] = source;
    if (threads) j["threads"] = *threads;
    else j["threads"] = nullptr;
    return j;
}

std::string ClusterMap::to_table() const {
    std::ostringstream out;
    size_t node_width = 4;
    for (const TaskSlot& s : slots) node_width = std::max(node_width, s.node.size());
    out << fmt::format("{:>4}  {:<{}}  {:>5}  {:<9}  {:>5}  {:<5}  {}\n", "rank", "node", node_width, "local", "role",
                       "index", "chief", "address");
    for (const TaskSlot& s : slots) {
        const bool is_self = self && self->rank == s.rank;
        out << fmt::format("{:>4}  {:<{}}  {:>5}  {:<9}  {:>5}  {:<5}  {}{}\n", s.rank, s.node, node_width,
                           s.local_id < 0 ? std::string("-") : std::to_string(s.local_id), role_name(s.role),
                           s.role_index, s.chief ? "yes" : "", s.address, is_self ? "   <- self" : "");
    }
    out << fmt::format("source: {}; {} ps, {} workers, {} evaluators; threads: {}\n", source, ps.size(), worker.size(),
                       evaluator.size(), threads ? std::to_string(*threads) : std::string("default"));
    return out.str();
}

std::string ClusterMap::validate() const {
    if (worker.empty()) return "the cluster has no worker";
    if (chief_index < 0 || static_cast<size_t>(chief_index) >= worker.size())
        return fmt::format("chief index {} is not a worker index", chief_index);
    for (const TaskSlot& s : slots) {
        const std::vector<std::string>& list = s.role == Role::kPs ? ps : s.role == Role::kWorker ? worker : evaluator;
        if (s.role_index < 0 || static_cast<size_t>(s.role_index) >= list.size())
            return fmt::format("rank {} has {} index {} out of range", s.rank, role_name(s.role), s.role_index);
        if (list[static_cast<size_t>(s.role_index)] != s.address)
            return fmt::format("rank {} address {} differs from the {} list", s.rank, s.address, role_name(s.role));
    }
    // Two tasks on one address would make one psd fail to bind, or a worker reach the wrong
    // task: typical of --interface naming an address that several nodes share.
    std::set<std::string> seen;
    for (const auto* list : {&ps, &worker, &evaluator})
        for (const std::string& address : *list)
            if (!address.empty() && !seen.insert(address).second)
                return fmt::format(
                    "address {} is given to two tasks (an --interface whose address several "
                    "nodes share? use --no-ib or another --interface)",
                    address);
    return {};
}

std::string to_endpoint(const std::string& address) {
    if (address.find("://") != std::string::npos) return address;
    return "tcp://" + address;
}

}  // namespace psrun
