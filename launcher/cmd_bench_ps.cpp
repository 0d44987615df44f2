#include "launcher/cmd_bench_ps.h"

#include <malloc.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/job_keys.h"
#include "common/option_checks.h"
#include "common/peak_flops.h"
#include "common/ps_client.h"
#include "common/signals.h"
#include "launcher/ps_processes.h"
#include "launcher/raw_zmq_baseline.h"

namespace psrun::launcher {
namespace {

using ps_tools::find_psd_binary;
using ps_tools::free_tcp_port;
using ps_tools::PsdProcess;
using ps_tools::raw_zmq_roundtrips;
using ps_tools::TempDir;

struct BenchOptions {
    std::uint32_t workers = 1;
    std::uint32_t shards = 1;
    std::string transport = "ipc";
    int rounds = 100;
    int warmup = 10;
    std::string optimizer = "none";      // none: psd checks gradients but applies nothing
    std::string auth = "none";           // none, or a job key file as a real job has it: mac or curve on tcp
    bool baseline = false;               // also time the raw ZeroMQ exchange, side by side
    int ps_threads = 2;                  // psd --threads: the check and the update use both cores while workers wait
    std::string wire_precision = "f32";  // f32 or bf16 payload frames (PsClientOptions::wire_bf16)
    std::string bin_dir;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

Result<nlohmann::json> run_bench(const BenchOptions& o) {
    TempDir dir;
    std::vector<std::string> endpoints;
    for (std::uint32_t i = 0; i < o.shards; ++i) {
        if (o.transport != "tcp") {  // shm: the control messages go over ipc
            endpoints.push_back("ipc://" + dir.path() + "/ps" + std::to_string(i));
        } else {
            PSRUN_TRY_ASSIGN(auto port, free_tcp_port());
            endpoints.push_back("tcp://127.0.0.1:" + std::to_string(port));
        }
    }
    std::optional<JobKeys> keys;
    const std::string key_file = dir.path() + "/job.key";
    if (o.auth != "none") {
        PSRUN_TRY_ASSIGN(auto k, ensure_job_key_file(key_file, true, std::chrono::milliseconds(1000)));
        keys = k;
    }
    PSRUN_TRY_ASSIGN(auto psd_path, find_psd_binary(o.bin_dir));
    std::vector<PsdProcess> servers;
    std::string ps_list;
    for (const auto& ep : endpoints) ps_list += (ps_list.empty() ? "" : ",") + ep;
    for (std::uint32_t i = 0; i < o.shards; ++i) {
        std::vector<std::string> args = {"--index",       std::to_string(i),           "--ps",        ps_list,
                                         "--num-workers", std::to_string(o.workers),   "--log-level", "warn",
                                         "--threads",     std::to_string(o.ps_threads)};
        if (o.auth != "none") args.insert(args.end(), {"--key-file", key_file, "--auth", o.auth});
        else args.push_back("--no-auth");
        servers.emplace_back(psd_path, args);
    }
    const auto tensors = mnist_deep_tensors();
    const std::size_t n = total_elements(tensors);
    std::optional<double> raw_ms;
    if (o.baseline) {  // before psd and any ZeroMQ context: it forks
        std::vector<std::size_t> frames;
        for (const auto& t : tensors) frames.push_back(t.elements());
        std::string ep = o.transport != "tcp" ? "ipc://" + dir.path() + "/raw" : "";
        if (ep.empty()) {
            PSRUN_TRY_ASSIGN(auto port, free_tcp_port());
            ep = "tcp://127.0.0.1:" + std::to_string(port);
        }
        PSRUN_TRY_ASSIGN(auto raw, raw_zmq_roundtrips(ep, frames, o.warmup, o.rounds));
        raw_ms = median(raw);
    }
    wire::InitConfig init;
    if (o.optimizer != "none") {
        PSRUN_TRY_ASSIGN(auto kind, parse_optimizer_kind(o.optimizer));
        init.optimizer.kind = kind;
    }
    std::vector<std::vector<double>> times(o.workers);
    std::vector<std::string> errors(o.workers);
    std::barrier sync_point(o.workers);
    std::chrono::steady_clock::time_point start, stop;
    std::vector<double> rss_mb(o.shards, 0);  // psd peak RSS, sampled before DONE
    double shmem_mb = 0;                      // of psd 0's RSS: pages of the workers' segments
    auto worker = [&](std::uint32_t w) {
        PsClientOptions co;
        co.endpoints = endpoints;
        co.index = w;
        co.role = w == 0 ? wire::Role::kChief : wire::Role::kWorker;
        co.keys = keys;
        if (o.auth != "none") co.auth = parse_auth_mode(o.auth).value_or(kDefaultAuthMode);
        co.tensors = tensors;
        co.connect_timeout = std::chrono::milliseconds(20000);
        co.reply_timeout = std::chrono::milliseconds(60000);
        co.shared_memory = o.transport == "shm";
        co.wire_bf16 = o.wire_precision == "bf16";
        PsClient client(co);
        std::vector<float> params(n, 0.01f), grads(n);
        for (std::size_t i = 0; i < n; ++i) grads[i] = 1e-3f * static_cast<float>(static_cast<int>(i % 31) - 15);
        auto fail = [&](const Error& e) { errors[w] = e.message; };
        if (auto r = client.hello(); !r) return fail(r.error()), sync_point.arrive_and_drop();
        std::span<const float> send = grads;
        if (co.shared_memory) {  // as a worker does: the gradient is computed straight into the segment
            if (client.shm_shards() != o.shards)
                return fail(Error{ErrorCode::kUnsupported, "shared memory was not set up (see the log)"}),
                       sync_point.arrive_and_drop();
            auto region = client.gradient_buffer(0);
            std::copy(grads.begin(), grads.end(), region.begin());
            send = region;
        }
        if (w == 0)
            if (auto r = client.init(init, params, o.optimizer == "none"); !r)
                return fail(r.error()), sync_point.arrive_and_drop();
        ParamFrames frames;
        auto first = client.pull(params);
        if (!first) return fail(first.error()), sync_point.arrive_and_drop();
        std::uint64_t step = first->step;
        for (int r = 0; r < o.warmup; ++r) {
            auto s = client.push_pull_frames(send, step, frames);
            if (!s) return fail(s.error()), sync_point.arrive_and_drop();
            step = s->step;
        }
        sync_point.arrive_and_wait();
        if (w == 0) start = std::chrono::steady_clock::now();
        for (int r = 0; r < o.rounds; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            auto s = client.push_pull_frames(send, step, frames);
            if (!s) return fail(s.error()), sync_point.arrive_and_drop();
            times[w].push_back(
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
            step = s->step;
        }
        sync_point.arrive_and_wait();
        if (w == 0) {  // every round is over; psd still runs until every worker sends DONE
            stop = std::chrono::steady_clock::now();
            for (std::uint32_t i = 0; i < o.shards; ++i) rss_mb[i] = servers[i].peak_rss_mb();
            shmem_mb = servers[0].rss_shmem_mb();
        }
        sync_point.arrive_and_wait();
        if (auto r = client.done(); !r) fail(r.error());
    };
    std::vector<std::thread> threads;
    for (std::uint32_t w = 0; w < o.workers; ++w) threads.emplace_back(worker, w);
    for (auto& t : threads) t.join();
    int exit_codes_ok = 0;
    for (auto& s : servers) exit_codes_ok += s.wait(10) == 0;
    for (const auto& e : errors)
        if (!e.empty()) return make_error(ErrorCode::kIo, e);
    std::vector<double> medians;
    for (const auto& t : times) medians.push_back(median(t));
    const double wall_s = std::chrono::duration<double>(stop - start).count();
    const double value_bytes = o.wire_precision == "bf16" && o.transport != "shm" ? 2.0 : 4.0;
    const double bytes = 2.0 * value_bytes * static_cast<double>(n) * o.workers * o.rounds;
    const auto layout = compute_layout(tensors, o.shards);
    const int slots = o.optimizer == "none" ? 0 : slot_count(init.optimizer.kind);
    const double state_mb = 4.0 * (1 + slots) * static_cast<double>(layout->shard_size(0)) / 1e6;
    const double load = loadavg_1m();
    nlohmann::json j = {
        {"bench", "ps"},
        {"workers", o.workers},
        {"shards", o.shards},
        {"transport", o.transport},
        {"rounds", o.rounds},
        {"ps_threads", o.ps_threads},
        {"optimizer", o.optimizer},
        {"adam_applied", o.optimizer == "adam"},
        {"optimizer_applied", o.optimizer != "none"},
        {"optimizer_slots", slots},
        {"auth", o.auth},
        {"wire_precision", o.wire_precision},
        {"roundtrip_ms", median(medians)},
        {"roundtrip_ms_per_worker", medians},
        {"aggregate_gbps", bytes / wall_s / 1e9},
        {"psd_peak_rss_mb", rss_mb},
        {"psd0_rss_shmem_mb", shmem_mb},
        {"psd0_params_plus_state_mb", state_mb},
        {"psd0_rss_ratio", rss_mb[0] / state_mb},
        {"psd_exit_ok", exit_codes_ok == static_cast<int>(o.shards)},
        {"loadavg_1m", load},
    };
    if (raw_ms) {
        j["raw_zmq_roundtrip_ms"] = *raw_ms;
        j["ratio_to_raw"] = median(medians) / *raw_ms;
    }
    return j;
}

}  // namespace

CLI::App* bench_subcommand(CLI::App& app) {
    for (auto* sub : app.get_subcommands([](CLI::App* a) { return a->get_name() == "bench"; })) return sub;
    auto* bench = app.add_subcommand("bench", "benchmarks printing JSON lines");
    bench->require_subcommand(1);
    return bench;
}

void add_bench_ps_command(CLI::App& app, int& exit_code) {
    auto opts = std::make_shared<BenchOptions>();
    auto* cmd = bench_subcommand(app)->add_subcommand(
        "ps", "round trips of 13.1 MB gradients/parameters with real psd processes");
    cmd->add_option("--workers", opts->workers, "worker clients (threads)")->check(integer_in(1, 64));
    cmd->add_option("--shards", opts->shards, "psd processes")->check(integer_in(1, 16));
    cmd->add_option("--transport", opts->transport,
                    "ipc, tcp (loopback) or shm (ipc for control, payloads in shared memory)")
        ->check(CLI::IsMember({"ipc", "tcp", "shm"}));
    cmd->add_option("--rounds", opts->rounds, "timed round trips per worker")->check(integer_in(1, 100000));
    cmd->add_option("--warmup", opts->warmup, "untimed round trips first")->check(integer_in(0, 10000));
    cmd->add_option("--optimizer", opts->optimizer,
                    "none (check only), sgd, momentum, nesterov, adagrad, adam, adam_torch, adamw, lamb (psd's update "
                    "per round)")
        ->check(
            CLI::IsMember({"none", "sgd", "momentum", "nesterov", "adagrad", "adam", "adam_torch", "adamw", "lamb"}));
    cmd->add_option("--ps-threads", opts->ps_threads, "psd --threads (gradient check and optimizer update)")
        ->check(thread_count(1))
        ->capture_default_str();
    cmd->add_option("--auth", opts->auth,
                    "none, or a fresh job key file as a real job has it, with mac or curve on tcp (ipc: owner-only "
                    "socket + job token either way)")
        ->check(CLI::IsMember({"none", "mac", "curve"}))
        ->capture_default_str();
    cmd->add_option("--wire-precision", opts->wire_precision,
                    "payload frames in f32 or bf16 (half the bytes; shm stays f32)")
        ->check(CLI::IsMember({"f32", "bf16"}))
        ->capture_default_str();
    cmd->add_flag("--baseline", opts->baseline,
                  "first time the raw ZeroMQ exchange (1 server, 1 client) for comparison");
    cmd->add_option("--bin-dir", opts->bin_dir, "directory holding psd (default: next to psrun, or $PSRUN_BIN_DIR)");
    cmd->callback([opts, &exit_code] {
        // Like psd: keep 13 MB receive buffers on the heap rather than fresh mmaps every round.
        mallopt(M_MMAP_THRESHOLD, 256 << 20);
        mallopt(M_TRIM_THRESHOLD, 512 << 20);
        auto result = run_bench(*opts);
        if (!result) {
            std::cerr << "bench ps: " << result.error().message << "\n";
            exit_code = 1;
            return;
        }
        std::cout << result->dump() << std::endl;
        exit_code = 0;
    });
}

}  // namespace psrun::launcher
