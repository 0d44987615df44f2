#include "launcher/map_builder.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "launcher/het_job.h"
#include "launcher/role_assignment.h"
#include "launcher/slurm_lists.h"

namespace psrun::launcher {
namespace {

Result<std::vector<TaskRole>> step_roles(const SlurmEnv& step, const MapOptions& options) {
    if (!options.tasks.empty()) {
        auto roles = parse_task_list(options.tasks);
        if (!roles) return roles;
        PSRUN_TRY(check_task_list(*roles, step.num_tasks));
        return roles;
    }
    // A step over every component of a het job: psd on component 0, workers on the others.
    if (!options.num_ps && step.het) {
        PSRUN_TRY_ASSIGN(auto roles, het_roles(*step.het, step.nodes, step.tasks_per_node));
        if (roles) return std::move(*roles);
    }
    PSRUN_TRY_ASSIGN(auto placement, parse_placement(options.placement));
    // Default: one ps, or none (a standalone worker) when the step has a single task.
    return place_ps(step.tasks_per_node, options.num_ps.value_or(step.num_tasks == 1 ? 0 : 1), placement);
}

}  // namespace

Result<ClusterMap> map_from_slurm(const SlurmEnv& step, const MapOptions& options, bool self_on_node) {
    PSRUN_TRY_ASSIGN(auto roles, step_roles(step, options));
    const int max_local = *std::max_element(step.tasks_per_node.begin(), step.tasks_per_node.end());
    if (!step.resv_ports.empty() && static_cast<int>(step.resv_ports.size()) < max_local)
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("SLURM_STEP_RESV_PORTS holds {} ports but a node runs {} "
                                      "tasks: use `srun --resv-ports={}`",
                                      step.resv_ports.size(), max_local, max_local));
    const std::string& self_node = step.nodes[static_cast<size_t>(step.nodeid)];
    auto hosts = node_addresses(step.nodes, self_on_node ? self_node : std::string(), options.address);
    if (!hosts) return tl::unexpected(hosts.error());

    ClusterMap map;
    map.source = "slurm";
    int chief_slot = -1;
    for (size_t k = 0; k < roles.size(); ++k)
        if (roles[k] == TaskRole::kChief) chief_slot = static_cast<int>(k);
    int k = 0;
    for (size_t node = 0; node < step.nodes.size(); ++node) {
        for (int local = 0; local < step.tasks_per_node[node]; ++local, ++k) {
            int port = 0;
            if (!step.resv_ports.empty()) {
                port = step.resv_ports[static_cast<size_t>(local)];
            } else {
                PSRUN_TRY_ASSIGN(auto derived, derived_port(step.job_id, step.step_id, local, options.port_base));
                port = derived;
            }
            TaskSlot slot;
            slot.rank = k;
            slot.node = step.nodes[node];
            slot.local_id = local;
            slot.address = fmt::format("{}:{}", (*hosts)[node], port);
            const TaskRole r = roles[static_cast<size_t>(k)];
            std::vector<std::string>* list = &map.worker;
            slot.role = Role::kWorker;
            if (r == TaskRole::kPs) {
                list = &map.ps;
                slot.role = Role::kPs;
            } else if (r == TaskRole::kEvaluator) {
                list = &map.evaluator;
                slot.role = Role::kEvaluator;
            }
            slot.role_index = static_cast<int>(list->size());
            list->push_back(slot.address);
            if (slot.role == Role::kWorker && (k == chief_slot || (chief_slot < 0 && slot.role_index == 0))) {
                slot.chief = true;
                map.chief_index = slot.role_index;
            }
            map.slots.push_back(std::move(slot));
        }
    }
    const int self_rank = slot_index(step.tasks_per_node, step.nodeid, step.localid);
    const TaskSlot& mine = map.slots[static_cast<size_t>(self_rank)];
    map.self = SelfInfo{self_rank, mine.role, mine.role_index, mine.node, step.procid};
    if (std::string why = map.validate(); !why.empty())
        return make_error(ErrorCode::kInvalidArgument, "inconsistent cluster map: " + why);
    return map;
}

Result<EnvMap> preview_env(const MapOptions& options) {
    if (options.preview_tasks_per_node.empty())
        return make_error(ErrorCode::kInvalidArgument, "--nodelist needs --tasks-per-node (e.g. '4(x2)')");
    auto counts = parse_tasks_per_node(options.preview_tasks_per_node);
    if (!counts) return make_error(ErrorCode::kInvalidArgument, "--tasks-per-node: " + counts.error().message);
    int total = 0;
    for (int c : *counts) total += c;
    if (options.preview_procid < 0 || options.preview_procid >= total)
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("--procid {} is out of range 0..{}", options.preview_procid, total - 1));
    int node = 0;
    int local = options.preview_procid;
    while (local >= (*counts)[static_cast<size_t>(node)]) local -= (*counts)[static_cast<size_t>(node++)];
    return EnvMap{
        {"SLURM_JOB_ID", std::to_string(options.preview_job_id)},
        {"SLURM_STEP_ID", std::to_string(options.preview_step_id)},
        {"SLURM_STEP_NODELIST", options.preview_nodelist},
        {"SLURM_STEP_TASKS_PER_NODE", options.preview_tasks_per_node},
        {"SLURM_STEP_NUM_TASKS", std::to_string(total)},
        {"SLURM_PROCID", std::to_string(options.preview_procid)},
        {"SLURM_NODEID", std::to_string(node)},
        {"SLURM_LOCALID", std::to_string(local)},
    };
}

Result<ClusterMap> resolve_map(const MapOptions& options, const EnvMap& env, int affinity_cpus) {
    Result<ClusterMap> map = make_error(ErrorCode::kNotFound, "no source");
    if (options.tf.any()) {
        map = map_from_tf_flags(options.tf);
    } else if (!options.preview_nodelist.empty()) {
        PSRUN_TRY_ASSIGN(auto fake, preview_env(options));
        auto step = SlurmEnv::parse(fake);
        if (!step) {
            std::string why = step.error().message;
            for (auto [var, flag] : {std::pair{"SLURM_STEP_NODELIST", "--nodelist"},
                                     std::pair{"SLURM_STEP_TASKS_PER_NODE", "--tasks-per-node"}})
                if (why.rfind(var, 0) == 0) why = flag + why.substr(std::string(var).size());
            return make_error(ErrorCode::kInvalidArgument, "preview: " + why);
        }
        map = map_from_slurm(*step, options, false);
    } else if (auto tf_config = env_get(env, "TF_CONFIG"); tf_config && !tf_config->empty()) {
        map = map_from_tf_config(*tf_config);
        if (!options.tasks.empty() || options.num_ps)
            spdlog::warn("TF_CONFIG is set and defines the roles: --tasks/--ps are ignored");
    } else {
        PSRUN_TRY_ASSIGN(auto step, SlurmEnv::parse(env));
        map = map_from_slurm(step, options);
    }
    if (!map) return map;
    if (options.threads) {
        if (*options.threads < 1) return make_error(ErrorCode::kInvalidArgument, "--threads must be at least 1");
        map->threads = options.threads;
    } else if (auto cpus = env_get(env, "SLURM_CPUS_PER_TASK")) {
        const int n = std::atoi(cpus->c_str());
        if (n < 1 || std::to_string(n) != *cpus)
            return make_error(ErrorCode::kInvalidArgument,
                              fmt::format("SLURM_CPUS_PER_TASK='{}': expected a positive integer", *cpus));
        map->threads = n;
    } else if (affinity_cpus > 0) {
        map->threads = affinity_cpus;
    }
    return map;
}

}  // namespace psrun::launcher

namespace psrun::launcher {

Result<ClusterMap> local_map(int num_ps, int num_workers, int num_evaluators,
                             const std::vector<std::string>& addresses) {
    if (num_ps < 0 || num_evaluators < 0)
        return make_error(ErrorCode::kInvalidArgument, "--ps and --evaluators must be >= 0");
    if (num_workers < 1) return make_error(ErrorCode::kInvalidArgument, "--workers must be >= 1");
    if (addresses.size() != static_cast<size_t>(num_ps + num_workers + num_evaluators))
        return make_error(ErrorCode::kInvalidArgument, "local_map: one address per task needed");
    ClusterMap map;
    map.source = "local";
    int rank = 0;
    for (auto [role, count] : {std::pair{Role::kPs, num_ps}, std::pair{Role::kWorker, num_workers},
                               std::pair{Role::kEvaluator, num_evaluators}}) {
        std::vector<std::string>& list = role == Role::kPs       ? map.ps
                                         : role == Role::kWorker ? map.worker
                                                                 : map.evaluator;
        for (int i = 0; i < count; ++i, ++rank) {
            const std::string& a = addresses[static_cast<size_t>(rank)];
            list.push_back(a);
            map.slots.push_back(TaskSlot{rank, "localhost", rank, role, i, role == Role::kWorker && i == 0, a});
        }
    }
    return map;
}

}  // namespace psrun::launcher
