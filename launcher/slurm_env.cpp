#include "launcher/slurm_env.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "launcher/hostlist.h"
#include "launcher/slurm_lists.h"

namespace psrun::launcher {
namespace {

auto invalid(const std::string& var, const std::string& value, const std::string& why) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}='{}': {}", var, value, why));
}

// Reads a non-negative decimal variable; `required` makes absence an error.
Result<std::optional<long>> read_number(const EnvMap& env, const std::string& var, bool required,
                                        long max = 0x7fffffffL) {
    const auto value = env_get(env, var);
    if (!value) {
        if (required)
            return make_error(ErrorCode::kNotFound, fmt::format("{} is not set; is this a Slurm job step?", var));
        return std::optional<long>();
    }
    if (value->empty() || value->size() > 10) return invalid(var, *value, "expected a non-negative integer");
    long v = 0;
    for (char c : *value) {
        if (!std::isdigit(static_cast<unsigned char>(c)))
            return invalid(var, *value, "expected a non-negative integer");
        v = v * 10 + (c - '0');
    }
    if (v > max) return invalid(var, *value, fmt::format("larger than {}", max));
    return std::optional<long>(v);
}

// The first of `names` that is set, with its name.
std::optional<std::pair<std::string, std::string>> first_set(const EnvMap& env,
                                                             std::initializer_list<const char*> names) {
    for (const char* n : names)
        if (auto v = env_get(env, n)) return std::make_pair(std::string(n), *v);
    return std::nullopt;
}

}  // namespace

bool SlurmEnv::in_job(const EnvMap& env) {
    return env.count("SLURM_JOB_ID") != 0 || env.count("SLURM_JOBID") != 0 || env.count("SLURM_STEP_ID") != 0;
}

Result<SlurmEnv> SlurmEnv::parse(const EnvMap& env) {
    if (!in_job(env))
        return make_error(ErrorCode::kNotFound,
                          "not inside a Slurm job (SLURM_JOB_ID is not set): run under srun, "
                          "set TF_CONFIG, give --ps_hosts/--worker_hosts, or use `psrun local`");
    if (env.count("SLURM_STEP_ID") == 0 && env.count("SLURM_STEP_NUM_TASKS") == 0)
        return make_error(ErrorCode::kInvalidArgument,
                          "this is a Slurm batch (or salloc) shell, not a job step (SLURM_STEP_ID and "
                          "SLURM_STEP_NUM_TASKS are unset): start one psrun per task with "
                          "`srun psrun run ...` inside the batch script");
    SlurmEnv s;

    const auto nodelist = first_set(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"});
    if (!nodelist) return make_error(ErrorCode::kNotFound, "SLURM_STEP_NODELIST (and SLURM_JOB_NODELIST) is not set");
    auto nodes = expand_hostlist(nodelist->second);
    if (!nodes) return invalid(nodelist->first, nodelist->second, nodes.error().message);
    s.nodes = std::move(*nodes);

    const auto tpn = first_set(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
    if (!tpn)
        return make_error(ErrorCode::kNotFound, "SLURM_STEP_TASKS_PER_NODE (and SLURM_TASKS_PER_NODE) is not set");
    auto counts = parse_tasks_per_node(tpn->second);
    if (!counts) return invalid(tpn->first, tpn->second, counts.error().message);
    s.tasks_per_node = std::move(*counts);
    if (s.tasks_per_node.size() != s.nodes.size())
        return invalid(tpn->first, tpn->second,
                       fmt::format("lists {} nodes but {}='{}' has {}", s.tasks_per_node.size(), nodelist->first,
                                   nodelist->second, s.nodes.size()));
    long total = 0;
    for (int c : s.tasks_per_node) total += c;

    const char* ntasks_var = env.count("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
    PSRUN_TRY_ASSIGN(auto ntasks, read_number(env, ntasks_var, true));
    if (*ntasks != total)
        return invalid(ntasks_var, env.at(ntasks_var),
                       fmt::format("but {}='{}' adds up to {} tasks", tpn->first, tpn->second, total));
    s.num_tasks = static_cast<int>(total);

    struct Field {
        const char* var;
        int* out;
        long max;
    };
    for (const Field& f : {Field{"SLURM_PROCID", &s.procid, total - 1},
                           Field{"SLURM_NODEID", &s.nodeid, static_cast<long>(s.nodes.size()) - 1}}) {
        PSRUN_TRY_ASSIGN(auto v, read_number(env, f.var, true));
        if (*v > f.max) return invalid(f.var, env.at(f.var), fmt::format("out of range 0..{}", f.max));
        *f.out = static_cast<int>(*v);
    }
    const long local_max = s.tasks_per_node[static_cast<size_t>(s.nodeid)] - 1;
    PSRUN_TRY_ASSIGN(auto localid, read_number(env, "SLURM_LOCALID", true));
    if (*localid > local_max)
        return invalid("SLURM_LOCALID", env.at("SLURM_LOCALID"),
                       fmt::format("out of range 0..{} for node {} ({})", local_max, s.nodeid,
                                   s.nodes[static_cast<size_t>(s.nodeid)]));
    s.localid = static_cast<int>(*localid);

    if (auto name = env_get(env, "SLURMD_NODENAME"); name && *name != s.nodes[static_cast<size_t>(s.nodeid)])
        return invalid("SLURMD_NODENAME", *name,
                       fmt::format("but SLURM_NODEID={} names node '{}' of {}", s.nodeid,
                                   s.nodes[static_cast<size_t>(s.nodeid)], nodelist->first));

    // SLURM_GTIDS lists the PROCIDs of this node's tasks by local id: it must agree with the
    // (node, local id) -> slot mapping this launcher relies on.
    if (auto gtids = env_get(env, "SLURM_GTIDS"); gtids && !gtids->empty()) {
        std::vector<long> ids;
        bool ok = true;
        for (size_t pos = 0; ok && pos <= gtids->size();) {
            const size_t comma = std::min(gtids->find(',', pos), gtids->size());
            const std::string item = gtids->substr(pos, comma - pos);
            ok = !item.empty() && item.size() < 10 && item.find_first_not_of("0123456789") == std::string::npos;
            if (ok) ids.push_back(std::stol(item));
            pos = comma + 1;
        }
        const int here = s.tasks_per_node[static_cast<size_t>(s.nodeid)];
        if (!ok || static_cast<int>(ids.size()) != here || ids[static_cast<size_t>(s.localid)] != s.procid)
            return invalid("SLURM_GTIDS", *gtids,
                           fmt::format("does not list {} tasks with SLURM_PROCID={} at "
                                       "SLURM_LOCALID={}",
                                       here, s.procid, s.localid));
    }

    PSRUN_TRY_ASSIGN(auto cpus, read_number(env, "SLURM_CPUS_PER_TASK", false, 4096));
    if (cpus && *cpus == 0) return invalid("SLURM_CPUS_PER_TASK", "0", "must be at least 1");
    if (cpus) s.cpus_per_task = static_cast<int>(*cpus);

    if (auto ports = env_get(env, "SLURM_STEP_RESV_PORTS"); ports && !ports->empty()) {
        auto list = parse_port_list(*ports);
        if (!list) return invalid("SLURM_STEP_RESV_PORTS", *ports, list.error().message);
        s.resv_ports = std::move(*list);
    }

    const char* job_var = env.count("SLURM_JOB_ID") ? "SLURM_JOB_ID" : "SLURM_JOBID";
    PSRUN_TRY_ASSIGN(auto job, read_number(env, job_var, false, 0xffffffffL));
    s.job_id = static_cast<std::uint32_t>(job.value_or(0));
    PSRUN_TRY_ASSIGN(auto step, read_number(env, "SLURM_STEP_ID", false, 0xffffffffL));
    s.step_id = static_cast<std::uint32_t>(step.value_or(0));
    PSRUN_TRY_ASSIGN(auto het, parse_het_groups(env));
    s.het = std::move(het);
    return s;
}

}  // namespace psrun::launcher
