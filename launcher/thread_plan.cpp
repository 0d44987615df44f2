#include "launcher/thread_plan.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>

namespace psrun::launcher {
namespace {

std::string cores_phrase(int cores) {
    return fmt::format("{} {} in this process's affinity mask", cores, cores == 1 ? "core" : "cores");
}

std::string plural(int n, const char* one, const char* many) { return fmt::format("{} {}", n, n == 1 ? one : many); }

}  // namespace

int affinity_cpu_count() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    return CPU_COUNT(&set);
}

ThreadPlan local_thread_plan(std::optional<int> threads, int cores, int num_workers) {
    if (threads) return {*threads, *threads, true};
    return {std::max(1, std::max(cores, 1) / std::max(num_workers, 1)), 1, false};
}

std::string describe_thread_plan(const ThreadPlan& plan, int cores, int num_workers, int num_ps) {
    const std::string mask = cores > 0 ? cores_phrase(cores) : "affinity mask unknown";
    if (plan.explicit_threads)
        return fmt::format("{}: --threads {} for every daemon ({}, {})", mask, plan.worker_threads,
                           plural(num_workers, "worker", "workers"), plural(num_ps, "psd", "psd"));
    if (num_ps == 0)
        return fmt::format("{}: {} for the standalone worker; --threads T overrides", mask,
                           plural(plan.worker_threads, "thread", "threads"));
    return fmt::format("{}: {} per worker ({}), {} per psd; --threads T overrides", mask,
                       plural(plan.worker_threads, "thread", "threads"), plural(num_workers, "worker", "workers"),
                       plan.ps_threads);
}

int local_compute_threads(const ThreadPlan& plan, int num_workers, int num_ps) {
    return num_workers * plan.worker_threads + num_ps * (plan.ps_threads - 1);
}

std::optional<std::string> local_oversubscription(const ThreadPlan& plan, int cores, int num_workers, int num_ps) {
    const int total = local_compute_threads(plan, num_workers, num_ps);
    if (cores <= 0 || total <= cores) return std::nullopt;
    std::string counted = fmt::format("{} x {}", plural(num_workers, "worker", "workers"),
                                      plural(plan.worker_threads, "thread", "threads"));
    if (num_ps > 0 && plan.ps_threads > 1)
        counted += fmt::format(" + {} x {} beyond the poll loop", plural(num_ps, "psd", "psd"), plan.ps_threads - 1);
    const int fit = std::max(1, cores / std::max(num_workers, 1));
    std::string fix =
        num_workers > cores
            ? fmt::format("use --workers {} or fewer (with --threads 1), or give psrun more cores", cores)
            : fmt::format("use --threads {} (or drop --threads for that default), or give psrun more cores", fit);
    return fmt::format("oversubscribed: {} = {} compute threads on {}; they slow each other down: {}", counted, total,
                       cores_phrase(cores), fix);
}

std::optional<std::string> task_oversubscription(std::optional<int> threads, int cores) {
    if (!threads || cores <= 0 || *threads <= cores) return std::nullopt;
    return fmt::format(
        "oversubscribed: {} for this task's daemon on {}; they slow each other down: use "
        "--threads {} or bind more cores to the task (srun --cpus-per-task)",
        plural(*threads, "thread", "threads"), cores_phrase(cores), cores);
}

}  // namespace psrun::launcher
