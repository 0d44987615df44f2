#include "launcher/cmd_bench_cluster.h"
#include "launcher/steady_rate.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "common/option_checks.h"
#include "common/peak_flops.h"
#include "common/utf8.h"
#include "launcher/bench_single.h"
#include "launcher/daemon_command.h"
#include "launcher/env_map.h"
#include "launcher/job_key.h"
#include "launcher/map_builder.h"
#include "launcher/supervisor.h"
#include "workerd/onnx/model_loader.h"
#include "workerd/train_flops.h"
#include "workerd/train_options.h"

namespace psrun::launcher {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchClusterOptions {
    int num_ps = 1;
    int num_workers = 2;
    int steps = 300;
    int warmup_steps = -1;  // -1: max(log_every, steps / 5)
    int log_every = 0;      // 0: max(1, steps / 50)
    int batch_size = 100;
    int threads_per_worker = 1;
    int threads = 2;  // the single-process run
    std::string data_dir;
    std::string dataset = "mnist";
    std::string precision = "f32";
    std::string overlap = "off";         // the workers' --overlap (workerd's default)
    std::string shared_memory = "on";    // the workers' --shared-memory (workerd's default)
    std::string wire_precision = "f32";  // the workers' --wire-precision (workerd's default)
    int repeat = 1;                      // cluster and single-process runs, alternating
    bool keep = false;
    bool peak = true;  // sample the host's FMA peak around the runs (common/peak_flops.h)
    DaemonOptions daemon;
};

// Removes the bench's private directory unless --keep.
struct WorkDir {
    std::string path;
    bool keep = false;
    ~WorkDir() {
        std::error_code ec;
        if (!path.empty() && !keep) std::filesystem::remove_all(path, ec);
    }
};

// Sends this process's stdout and stderr (and so every daemon's) to `path` while it lives.
class RedirectOutput {
  public:
    explicit RedirectOutput(const std::string& path) {
        std::cout.flush();
        spdlog::default_logger()->flush();
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) throw std::runtime_error("cannot create " + path);
        saved_out_ = ::dup(1);
        saved_err_ = ::dup(2);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::close(fd);
    }
    ~RedirectOutput() {
        spdlog::default_logger()->flush();
        ::dup2(saved_out_, 1);
        ::dup2(saved_err_, 2);
        ::close(saved_out_);
        ::close(saved_err_);
    }
    RedirectOutput(const RedirectOutput&) = delete;
    RedirectOutput& operator=(const RedirectOutput&) = delete;

  private:
    int saved_out_ = -1, saved_err_ = -1;
};

void print_tail(const std::string& path, std::size_t lines) {
    std::ifstream in(path);
    std::deque<std::string> tail;
    for (std::string line; std::getline(in, line);) {
        tail.push_back(line);
        if (tail.size() > lines) tail.pop_front();
    }
    for (const auto& l : tail) std::cerr << "  " << l << "\n";
}

std::vector<std::string> training_options(const BenchClusterOptions& o, const std::string& model_dir) {
    std::vector<std::string> t = {"--model-dir",       model_dir,
                                  "--steps",           std::to_string(o.steps),
                                  "--batch-size",      std::to_string(o.batch_size),
                                  "--log-every",       std::to_string(o.log_every),
                                  "--eval-every",      "0",
                                  "--checkpoint-secs", "0",
                                  "--dataset",         o.dataset,
                                  "--precision",       o.precision,
                                  "--overlap",         o.overlap,
                                  "--shared-memory",   o.shared_memory,
                                  "--wire-precision",  o.wire_precision};
    if (!o.data_dir.empty()) t.insert(t.end(), {"--data-dir", o.data_dir});
    return t;
}

// Runs the cluster as `psrun local` does; returns the chief's steady rate (throws on failure).
nlohmann::json run_cluster(const BenchClusterOptions& o, const std::string& dir) {
    const int total = o.num_ps + o.num_workers;
    std::vector<std::string> addresses;
    for (int i = 0; i < total; ++i)
        addresses.push_back(i < o.num_ps ? fmt::format("ipc://{}/ps-{}", dir, i)
                                         : fmt::format("ipc://{}/worker-{}", dir, i - o.num_ps));
    auto map = local_map(o.num_ps, o.num_workers, 0, addresses);
    if (!map) throw UsageError(map.error().message);
    map->threads = o.threads_per_worker;
    DaemonOptions daemon = o.daemon;
    if (!daemon.reconnect_wait) daemon.reconnect_wait = 0;  // one host, as psrun local
    const std::string model_dir = dir + "/model";
    daemon.training = training_options(o, model_dir);
    auto key = prepare_local_job_key(dir + "/job.key");
    if (!key) throw UsageError(key.error().message);
    daemon.key_file = *key;
    const EnvMap env = env_from_environ(environ);
    std::vector<DaemonCommand> commands;
    for (const TaskSlot& slot : map->slots) {
        auto cmd = daemon_command(*map, slot.role, slot.role_index, daemon);
        if (!cmd) throw UsageError(cmd.error().message);
        auto path = daemon_path(cmd->program, daemon, env);
        if (!path) throw UsageError(path.error().message);
        cmd->path = *path;
        commands.push_back(std::move(*cmd));
    }
    const std::string log = dir + "/cluster.log";
    const auto start = Clock::now();
    int code = 0;
    {
        RedirectOutput quiet(log);
        Supervisor supervisor(std::chrono::seconds(10));
        code = supervisor.run(commands);
    }
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    if (code != 0) {
        std::cerr << "psrun bench cluster: the cluster failed (exit " << code << "); last lines of " << log << ":\n";
        print_tail(log, 30);
        throw std::runtime_error("cluster run failed" + std::string(o.keep ? "" : " (use --keep to keep the log)"));
    }
    auto rate = steady_rate_from_metrics(model_dir + "/metrics.jsonl", o.batch_size, o.warmup_steps, o.steps);
    if (!rate) throw std::runtime_error(rate.error().message);
    std::ifstream summary_in(model_dir + "/summary.json");
    const auto summary = nlohmann::json::parse(summary_in, nullptr, false);
    return {{"images_per_sec", rate->images_per_sec},
            {"measured_from_step", rate->first_step},
            {"measured_to_step", rate->last_step},
            {"measured_seconds", rate->seconds},
            {"cluster_wall_seconds", wall},
            {"final_test_accuracy", summary.is_object() ? summary.value("test_accuracy", -1.0) : -1.0}};
}

// Index of the median of `v` (the upper one of an even count); v is not empty.
std::size_t median_index(const std::vector<double>& v) {
    std::vector<std::size_t> order(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&v](std::size_t a, std::size_t b) { return v[a] < v[b]; });
    return order[order.size() / 2];
}

// The figures of `images_per_sec` against the host: GFLOP/s, that precision's peak for `threads`
// compute threads, and their quotient (null without a peak).
struct AgainstPeak {
    double gflops = 0;
    nlohmann::json peak_gflops = nullptr;
    nlohmann::json fraction = nullptr;
};

// Peak samples at each point of the run sequence (before the first run and after each).
constexpr int kPeakSamplesBetweenRuns = 3;

AgainstPeak against_peak(double images_per_sec, double flops_per_image, const std::optional<PeakFlops>& peak,
                         const std::string& precision, int threads) {
    AgainstPeak a;
    a.gflops = images_per_sec * flops_per_image / 1e9;
    if (!peak) return a;
    const double limit = peak->gflops_for(precision, threads);
    if (limit > 0) a.peak_gflops = limit;
    a.fraction = fraction_of_peak(a.gflops, limit);
    return a;
}

int run_bench_cluster(BenchClusterOptions o) {
    if (o.log_every <= 0) o.log_every = std::max(1, o.steps / 50);
    if (o.warmup_steps < 0) o.warmup_steps = std::max(o.log_every, o.steps / 5);
    if (o.warmup_steps + 2 * o.log_every >= o.steps)
        throw UsageError(
            fmt::format("--steps {} leaves too little to measure after {} warm-up steps with a record "
                        "every {} steps: raise --steps or lower --warmup-steps/--log-every",
                        o.steps, o.warmup_steps, o.log_every));
    const double load_start = loadavg_1m();
    // The workers train the default model (no --model is passed): its FMA work per image.
    auto model = onnx_io::load_any_model(worker::TrainOptions{}.model);
    if (!model) throw std::runtime_error(model.error().message);
    const double flops_per_image = worker::training_flops(*model).total();
    const int cluster_threads = o.num_workers * o.threads_per_worker;
    // The peak is sampled before, between and after the runs (common/peak_flops.h): the host's
    // speed drifts, so a probe taken once would be a different host from the runs'. Each sample
    // joins its threads before it returns, so this process is single-threaded whenever the
    // Supervisor starts daemons.
    std::optional<PeakSampler> sampler;
    if (o.peak) sampler.emplace(std::max(cluster_threads, o.threads));
    const auto sample_peak = [&sampler] {
        for (int i = 0; sampler && i < kPeakSamplesBetweenRuns; ++i) sampler->sample();
    };
    sample_peak();
    WorkDir dir;
    dir.keep = o.keep;
    std::string pattern = (std::filesystem::temp_directory_path() / "psrun-bench-cluster.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a temporary directory");
    dir.path = pattern;
    spdlog::info(
        "bench cluster: {} ps + {} workers ({} thread{} each), {} steps of batch {} (daemon logs: {}/cluster.log)",
        o.num_ps, o.num_workers, o.threads_per_worker, o.threads_per_worker == 1 ? "" : "s", o.steps, o.batch_size,
        dir.path);
    // The host's speed drifts by tens of percent over minutes (shared vCPUs): alternate the two runs and compare
    // medians, so a slow minute does not land on one side only.
    std::vector<nlohmann::json> clusters, singles;
    std::vector<double> cluster_rates, single_rates;
    nlohmann::json pairs = nlohmann::json::array();
    for (int r = 0; r < o.repeat; ++r) {
        const std::string work = o.repeat == 1 ? dir.path : dir.path + "/run-" + std::to_string(r);
        std::filesystem::create_directories(work);
        clusters.push_back(run_cluster(o, work));
        cluster_rates.push_back(clusters.back()["images_per_sec"].get<double>());
        sample_peak();
        spdlog::info("cluster: {:.0f} img/s; now the single-process run ({} threads)", cluster_rates.back(), o.threads);
        singles.push_back(run_single_in_child(
            SingleRunOptions{o.data_dir, o.dataset, o.precision, o.batch_size, o.steps, o.warmup_steps, o.threads}));
        single_rates.push_back(singles.back()["images_per_sec"].get<double>());
        sample_peak();
    }
    std::optional<PeakFlops> peak;
    if (sampler) peak = sampler->median();
    for (std::size_t r = 0; r < cluster_rates.size(); ++r) {
        pairs.push_back({{"images_per_sec", cluster_rates[r]},
                         {"single_process_images_per_sec", single_rates[r]},
                         {"ratio", single_rates[r] > 0 ? cluster_rates[r] / single_rates[r] : 0.0},
                         {"fraction_of_peak",
                          against_peak(cluster_rates[r], flops_per_image, peak, o.precision, cluster_threads).fraction},
                         {"single_process_fraction_of_peak",
                          against_peak(single_rates[r], flops_per_image, peak, o.precision, o.threads).fraction}});
    }
    const std::size_t mid_cluster = median_index(cluster_rates), mid_single = median_index(single_rates);
    const nlohmann::json& cluster = clusters[mid_cluster];
    const nlohmann::json& single = singles[mid_single];
    const double aggregate = cluster_rates[mid_cluster];
    const double alone = single_rates[mid_single];
    const AgainstPeak cluster_peak = against_peak(aggregate, flops_per_image, peak, o.precision, cluster_threads);
    const AgainstPeak single_peak = against_peak(alone, flops_per_image, peak, o.precision, o.threads);
    nlohmann::json out = {
        {"benchmark", "cluster"},
        {"images_per_sec", aggregate},
        {"single_process_images_per_sec", alone},
        {"ratio", alone > 0 ? aggregate / alone : 0.0},
        {"ps", o.num_ps},
        {"workers", o.num_workers},
        {"threads_per_worker", o.threads_per_worker},
        {"single_process_threads", o.threads},
        {"batch_size", o.batch_size},
        {"steps", o.steps},
        {"warmup_steps", o.warmup_steps},
        {"log_every", o.log_every},
        {"precision", o.precision},
        {"overlap", o.overlap},
        {"shared_memory", o.shared_memory},
        {"wire_precision", o.wire_precision},
        {"repeat", o.repeat},
        {"dataset", o.dataset},
        {"transport", "ipc"},
        {"cluster", cluster},
        {"single_process", single},
        {"loadavg_1m", load_start},
        {"loadavg_1m_end", loadavg_1m()},
        {"cpu_model", cpu_model_name()},
        {"mflop_per_image", flops_per_image / 1e6},
        {"gflops", cluster_peak.gflops},
        {"single_process_gflops", single_peak.gflops},
    };
    if (peak) {
        out["peak"] = peak->to_json();
        out["peak_gflops"] = cluster_peak.peak_gflops;
        out["fraction_of_peak"] = cluster_peak.fraction;
        out["single_process_peak_gflops"] = single_peak.peak_gflops;
        out["single_process_fraction_of_peak"] = single_peak.fraction;
    }
    if (o.repeat > 1) out["pairs"] = pairs;
    if (o.keep) out["work_dir"] = dir.path;
    std::cout << json_text(out) << std::endl;
    return kExitOk;
}

}  // namespace

void add_bench_cluster_command(CLI::App& app, int& exit_code) {
    auto found = app.get_subcommands([](CLI::App* sub) { return sub->get_name() == "bench"; });
    CLI::App* bench = found.empty() ? app.add_subcommand("bench", "benchmarks") : found.front();
    bench->require_subcommand(1);
    auto o = std::make_shared<BenchClusterOptions>();
    CLI::App* cmd = bench->add_subcommand(
        "cluster",
        "aggregate images/s of a local cluster (K psd + W workerd on ipc, real MNIST) and of a single-process run "
        "of the same trainer, measured in the same call (one JSON line)");
    cmd->add_option("--ps", o->num_ps, "parameter servers")->check(integer_in(1, 64))->capture_default_str();
    cmd->add_option("--workers", o->num_workers, "workers")->check(integer_in(1, 64))->capture_default_str();
    cmd->add_option("--steps", o->steps, "global steps of each run")
        ->check(integer_in(10, 1000000))
        ->capture_default_str();
    cmd->add_option("--warmup-steps", o->warmup_steps, "steps not measured (default: max(log-every, steps/5))")
        ->check(integer_in(0, 1000000));
    cmd->add_option("--log-every", o->log_every, "the chief's progress record interval (default: steps/50)")
        ->check(integer_in(1, 1000000));
    cmd->add_option("--batch-size", o->batch_size, "examples per step")
        ->check(integer_in(1, 4096))
        ->capture_default_str();
    cmd->add_option("--threads-per-worker", o->threads_per_worker, "compute threads of each workerd")
        ->check(thread_count(1))
        ->capture_default_str();
    cmd->add_option("--threads", o->threads, "compute threads of the single-process run")
        ->check(thread_count(1))
        ->capture_default_str();
    cmd->add_option("--data-dir", o->data_dir, "dataset directory (default: psrun data fetch's)");
    cmd->add_option("--dataset", o->dataset, "mnist or fashion-mnist")->capture_default_str();
    cmd->add_option("--precision", o->precision, "f32 or bf16")->capture_default_str();
    cmd->add_option("--shared-memory", o->shared_memory,
                    "the workers' --shared-memory: payloads through shared memory, not the ipc socket (on|off)")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    cmd->add_option("--wire-precision", o->wire_precision,
                    "the workers' --wire-precision: payload frames in f32 or bf16 (shared memory stays f32)")
        ->check(CLI::IsMember({"f32", "bf16"}))
        ->capture_default_str();
    cmd->add_option("--overlap", o->overlap, "the workers' --overlap: exchange while computing (on|off)")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    cmd->add_option("--repeat", o->repeat,
                    "cluster and single-process runs, alternating; the JSON holds their medians and every pair")
        ->check(integer_in(1, 20))
        ->capture_default_str();
    cmd->add_option("--bin-dir", o->daemon.bin_dir, "directory holding psd and workerd (default: next to psrun)");
    cmd->add_option("--peak", o->peak,
                    "sample this host's f32/bf16 FMA peak before, between and after the runs (~0.1 s each time) and "
                    "report both runs as fractions of its median (1), or not (0)")
        ->capture_default_str();
    cmd->add_flag("--keep", o->keep, "keep the work dir (daemon logs, metrics, checkpoint) and print its path");
    cmd->callback([o, &exit_code] {
        try {
            exit_code = run_bench_cluster(*o);
        } catch (const UsageError& e) {
            std::cerr << "psrun bench cluster: " << e.what() << "\n";
            exit_code = kExitUsage;
        } catch (const std::exception& e) {
            std::cerr << "psrun bench cluster: " << e.what() << "\n";
            exit_code = kExitFailure;
        }
    });
}

}  // namespace psrun::launcher
