#include "launcher/job_key.h"

#include <functional>

#include "common/job_keys.h"

namespace psrun::launcher {

std::string job_name_for(const ClusterMap& map, const EnvMap& env) {
    if (auto it = env.find("SLURM_JOB_ID"); it != env.end() && !it->second.empty()) return it->second;
    std::string all;
    for (const auto& a : map.ps) all += a + ",";
    all += ";";
    for (const auto& a : map.worker) all += a + ",";
    return "tf-" + std::to_string(std::hash<std::string>{}(all) % 1000000007ull);
}

Result<std::string> prepare_job_key(const DaemonOptions& options, const ClusterMap& map, const EnvMap& env,
                                    std::chrono::milliseconds timeout) {
    if (options.no_auth) return std::string();
    std::string path = options.key_file;
    if (path.empty()) {
        const auto model_dir = training_model_dir(options.training).value_or("");
        path = default_job_key_path(model_dir, job_name_for(map, env));
    }
    // The chief creates the key; a ps or another worker waits for it, so every task of the
    // job ends up with the same token and keys.
    const bool creator = map.self && map.self->role == Role::kWorker && map.self->index == map.chief_index;
    auto keys = ensure_job_key_file(path, creator && options.key_file.empty(), timeout);
    if (!keys)
        return make_error(keys.error().code, keys.error().message +
                                                 " (the job key file must be on a filesystem every node shares: "
                                                 "set --model-dir to a shared directory, pass --key-file, or "
                                                 "--no-auth on a trusted network)");
    return path;
}

Result<std::string> prepare_local_job_key(const std::string& path) {
    PSRUN_TRY(ensure_job_key_file(path, true, std::chrono::milliseconds(0)));
    return path;
}

}  // namespace psrun::launcher
