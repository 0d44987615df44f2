// psrun-bench-gemm: the GEMMs of a dense layer's training step (forward, data gradient, weight
// gradient) in oneDNN 2.6 and libxsmm 1.17, bf16 or f32, interleaved, one JSON line per layer,
// pass and library: median ms, GFLOP/s, its fraction of this host's peak for that precision
// (sampled between rounds, common/peak_flops.h) and its largest difference from oneDNN's result
// (docs/benchmarks.md "Measured decisions"). Usage errors exit 2.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench/gemm/gemm_backends.h"
#include "common/peak_flops.h"

namespace {

using psrun::bench::Gemm;

struct Layer {
    std::int64_t batch = 0, in = 0, out = 0;
};

struct Case {  // one GEMM of one layer, and each backend's result and times
    std::string layer, pass;
    Gemm gemm;
    std::vector<std::vector<float>> outputs;  // by backend; [0]: oneDNN's, the reference
    std::vector<std::vector<double>> ms;
    std::vector<std::string> skipped;
};

// n normal draws rounded to bf16, held both as bf16 and as the floats of the same values: a GEMM
// reads those of its precision, and f32 and bf16 runs multiply the same numbers.
struct Operand {
    std::vector<float> f32;
    std::vector<std::uint16_t> bf16;
    const void* data(bool use_bf16) const {
        return use_bf16 ? static_cast<const void*>(bf16.data()) : static_cast<const void*>(f32.data());
    }
};

Operand random_operand(std::size_t n, std::mt19937& rng) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    Operand o;
    o.f32.resize(n);
    o.bf16.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        o.bf16[i] = psrun::bench::to_bf16(d(rng));
        o.f32[i] = std::bit_cast<float>(static_cast<std::uint32_t>(o.bf16[i]) << 16);  // the same values
    }
    return o;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

void openmp_team(int threads, const std::function<void(int)>& body) {
#pragma omp parallel num_threads(threads)
    for (int t = omp_get_thread_num(); t < threads; t += omp_get_num_threads()) body(t);
}

int run(int threads, int rounds, int reps, bool bf16, const std::vector<Layer>& layers) {
    omp_set_num_threads(threads);
    std::vector<std::unique_ptr<psrun::bench::GemmBackend>> backends;
    backends.push_back(psrun::bench::make_onednn_backend());  // first: the reference
    backends.push_back(psrun::bench::make_libxsmm_backend(bf16, false));
    backends.push_back(psrun::bench::make_libxsmm_backend(bf16, true));
    std::mt19937 rng(1);
    std::vector<Operand> data;        // each layer's x, w, dy
    data.reserve(3 * layers.size());  // the pointers taken below stay valid
    std::vector<Case> cases;
    for (const Layer& l : layers) {
        const std::string name = std::to_string(l.batch) + "x" + std::to_string(l.in) + "x" + std::to_string(l.out);
        data.push_back(random_operand(static_cast<std::size_t>(l.batch * l.in), rng));
        const void* x = data.back().data(bf16);
        data.push_back(random_operand(static_cast<std::size_t>(l.in * l.out), rng));
        const void* w = data.back().data(bf16);
        data.push_back(random_operand(static_cast<std::size_t>(l.batch * l.out), rng));
        const void* dy = data.back().data(bf16);
        // y = x w; dx = dy w^T; dw = x^T dy (w stored [in x out], as psrun's dense weights)
        cases.push_back({name, "forward", Gemm{l.batch, l.out, l.in, false, false, bf16, x, w, nullptr}, {}, {}, {}});
        cases.push_back(
            {name, "data_gradient", Gemm{l.batch, l.in, l.out, false, true, bf16, dy, w, nullptr}, {}, {}, {}});
        cases.push_back(
            {name, "weight_gradient", Gemm{l.in, l.out, l.batch, true, false, bf16, x, dy, nullptr}, {}, {}, {}});
    }
    psrun::PeakSampler sampler(threads, 10, openmp_team);
    for (auto& c : cases) {
        c.outputs.assign(backends.size(), std::vector<float>(static_cast<std::size_t>(c.gemm.m * c.gemm.n)));
        c.ms.assign(backends.size(), {});
        c.skipped.assign(backends.size(), "");
    }
    // Each backend prepared per case right before its runs (oneDNN's primitive, libxsmm's kernel):
    // not timed. Rounds interleave the backends so drift of the host's speed hits all alike.
    for (int round = 0; round < rounds; ++round) {
        for (auto& c : cases)
            for (std::size_t b = 0; b < backends.size(); ++b) {
                if (!c.skipped[b].empty()) continue;
                Gemm g = c.gemm;
                g.c = c.outputs[b].data();
                std::string why;
                if (!backends[b]->prepare(g, why)) {
                    c.skipped[b] = why;
                    continue;
                }
                backends[b]->run();  // warm
                for (int r = 0; r < reps; ++r) {
                    const auto t0 = std::chrono::steady_clock::now();
                    backends[b]->run();
                    c.ms[b].push_back(
                        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
                }
            }
        sampler.sample();
    }
    const psrun::PeakFlops peak = sampler.median();
    const std::string xsmm_target = psrun::bench::libxsmm_target();
    for (const auto& c : cases) {
        const auto& ref = c.outputs[0];
        double scale = 0;
        for (float v : ref) scale = std::max(scale, static_cast<double>(std::fabs(v)));
        for (std::size_t b = 0; b < backends.size(); ++b) {
            nlohmann::json j{{"bench", "gemm"},
                             {"precision", bf16 ? "bf16" : "f32"},
                             {"cpu_model", peak.cpu_model},
                             {"threads", threads},
                             {"layer", c.layer},
                             {"pass", c.pass},
                             {"backend", backends[b]->name()},
                             {"m", c.gemm.m},
                             {"n", c.gemm.n},
                             {"k", c.gemm.k},
                             {"loadavg", psrun::loadavg_1m()}};
            if (backends[b]->name().starts_with("libxsmm")) j["libxsmm_target"] = xsmm_target;
            if (!c.skipped[b].empty()) {
                j["skipped"] = c.skipped[b];
                std::cout << j.dump() << std::endl;
                continue;
            }
            double diff = 0;
            for (std::size_t i = 0; i < ref.size(); ++i)
                diff = std::max(diff, static_cast<double>(std::fabs(c.outputs[b][i] - ref[i])));
            const double ms = median(c.ms[b]);
            const double gflops = 2.0 * static_cast<double>(c.gemm.m * c.gemm.n * c.gemm.k) / (ms * 1e6);
            j["ms_median"] = ms;
            double largest = 0;  // of this backend's own product (a GEMM that wrote nothing reads 0)
            for (float v : c.outputs[b]) largest = std::max(largest, static_cast<double>(std::fabs(v)));
            j["max_abs_output"] = largest;
            j["gflops"] = gflops;
            const double peak_gflops = bf16 ? peak.bf16_gflops : peak.f32_gflops;
            j["peak_gflops"] = peak_gflops;
            j["fraction_of_peak"] = psrun::fraction_of_peak(gflops, peak_gflops);
            // null where oneDNN could not run this GEMM (no reference)
            j["max_diff_vs_onednn_relative"] =
                c.skipped[0].empty() ? nlohmann::json(scale > 0 ? diff / scale : 0.0) : nlohmann::json();
            std::cout << j.dump() << std::endl;
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"GEMMs of dense layers in oneDNN and libxsmm, side by side (JSON lines)"};
    int threads = 2, rounds = 5, reps = 5;
    std::string precision = "bf16";
    std::vector<std::string> specs{"128:3136:1024", "2048:256:1024", "2048:1024:256"};
    app.add_option("--threads", threads, "OpenMP threads (1..256)")->check(CLI::Range(1, 256));
    app.add_option("--rounds", rounds, "interleaved rounds (1..100)")->check(CLI::Range(1, 100));
    app.add_option("--reps", reps, "timed runs per backend and round (1..1000)")->check(CLI::Range(1, 1000));
    app.add_option("--precision", precision, "bf16 or f32")->check(CLI::IsMember({"bf16", "f32"}));
    app.add_option("--layer", specs, "BATCH:IN:OUT of a dense layer (repeatable); each a multiple of 64");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    std::vector<Layer> layers;
    for (const auto& s : specs) {
        Layer l;
        char tail = 0;
        if (std::sscanf(s.c_str(), "%ld:%ld:%ld%c", &l.batch, &l.in, &l.out, &tail) != 3 || l.batch < 64 || l.in < 64 ||
            l.out < 64 || l.batch % 64 || l.in % 64 || l.out % 64 || l.batch > 65536 || l.in > 65536 || l.out > 65536) {
            std::cerr << "psrun-bench-gemm: --layer " << s
                      << ": give BATCH:IN:OUT, each a multiple of 64 in 64..65536 (e.g. 128:3136:1024)\n";
            return 2;
        }
        layers.push_back(l);
    }
    try {
        return run(threads, rounds, reps, precision == "bf16", layers);
    } catch (const std::exception& e) {
        std::cerr << "psrun-bench-gemm: " << e.what() << "\n";
        return 1;
    }
}
