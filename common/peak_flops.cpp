#include "common/peak_flops.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/cpu_isa.h"

namespace psrun {
// A named namespace, not an anonymous one: PeakSampler::Impl holds a Kernel, and a class with
// external linkage must not hold a type that has none (GCC's -Wsubobject-linkage in unity builds).
namespace peak_detail {

using KernelFn = void (*)(std::uint64_t iterations);

struct Kernel {
    KernelFn fn = nullptr;
    double flop_per_iteration = 0;
    const char* isa = "none";
};

}  // namespace peak_detail

namespace {

using Clock = std::chrono::steady_clock;
using peak_detail::Kernel;
using peak_detail::KernelFn;

// Where the chains' sums go, so that no compiler drops the work.
volatile float g_sink = 0;
// Read at run time, so that no compiler folds the chains into constants.
volatile float g_seed = 1e-3f;

#if defined(__x86_64__)
// Independent accumulators per thread. An FMA unit of today's x86 cores takes 4-6 cycles per
// dependent FMA and starts 1-2 per cycle, so at most 12 chains are in flight; 16 (AVX-512, 32
// registers) and 12 (AVX2, 16 registers) leave a margin and still fit the register file.
constexpr int kZmmChains = 16;
constexpr int kYmmChains = 12;

// Adds the 16 lanes into g_sink (through memory: GCC 12's _mm512_reduce_add_ps trips its own
// -Wuninitialized).
__attribute__((target("avx512f"))) void store_sum(__m512 sum) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, sum);
    float total = 0;
    for (float v : lanes) total += v;
    g_sink = total;
}

// acc = acc * b + c converges to c / (1 - b): no overflow, no subnormals, however long it runs.
__attribute__((target("avx512f"))) void f32_avx512(std::uint64_t iterations) {
    const float seed = g_seed;
    __m512 acc[kZmmChains];
    for (int k = 0; k < kZmmChains; ++k) acc[k] = _mm512_set1_ps(seed * static_cast<float>(k + 1));
    const __m512 b = _mm512_set1_ps(1.0f - seed), c = _mm512_set1_ps(seed);
    for (std::uint64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
        for (int k = 0; k < kZmmChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], b, c);
    }
    __m512 sum = acc[0];
    for (int k = 1; k < kZmmChains; ++k) sum = _mm512_add_ps(sum, acc[k]);
    store_sum(sum);
}

__attribute__((target("avx2,fma"))) void f32_avx2(std::uint64_t iterations) {
    const float seed = g_seed;
    __m256 acc[kYmmChains];
    for (int k = 0; k < kYmmChains; ++k) acc[k] = _mm256_set1_ps(seed * static_cast<float>(k + 1));
    const __m256 b = _mm256_set1_ps(1.0f - seed), c = _mm256_set1_ps(seed);
    for (std::uint64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
        for (int k = 0; k < kYmmChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], b, c);
    }
    __m256 sum = acc[0];
    for (int k = 1; k < kYmmChains; ++k) sum = _mm256_add_ps(sum, acc[k]);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, sum);
    float total = 0;
    for (float v : lanes) total += v;
    g_sink = total;
}

// acc += a0*b0 + a1*b1 per lane with a = b = seed (~1e-3 as bf16): acc grows by ~2e-6 per
// iteration, far from overflow in any calibrated run.
__attribute__((target("avx512f,avx512bf16"))) void bf16_avx512(std::uint64_t iterations) {
    const float seed = g_seed;
    __m512 acc[kZmmChains];
    for (int k = 0; k < kZmmChains; ++k) acc[k] = _mm512_set1_ps(seed * static_cast<float>(k + 1));
    const __m512 x = _mm512_set1_ps(seed);
    const __m512bh a = _mm512_cvtne2ps_pbh(x, x);
    for (std::uint64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
        for (int k = 0; k < kZmmChains; ++k) acc[k] = _mm512_dpbf16_ps(acc[k], a, a);
    }
    __m512 sum = acc[0];
    for (int k = 1; k < kZmmChains; ++k) sum = _mm512_add_ps(sum, acc[k]);
    store_sum(sum);
}
#endif

Kernel f32_kernel() {
#if defined(__x86_64__)
    if (avx512_allowed()) return {f32_avx512, kZmmChains * 16 * 2.0, "avx512f"};  // unless capped
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return {f32_avx2, kYmmChains * 8 * 2.0, "avx2+fma"};
#endif
    return {};
}

Kernel bf16_kernel() {
#if defined(__x86_64__)
    if (avx512_bf16_allowed()) return {bf16_avx512, kZmmChains * 16 * 4.0, "avx512_bf16"};
#endif
    return {};
}

double seconds_of(KernelFn fn, std::uint64_t iterations) {
    const auto t0 = Clock::now();
    fn(iterations);
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Iterations for about `trial_ms` on one thread: doubles a short run until it takes >= 2 ms,
// then scales.
std::uint64_t calibrate(KernelFn fn, double trial_ms) {
    std::uint64_t iterations = 1024;
    double s = seconds_of(fn, iterations);
    while (s < 2e-3 && iterations < (std::uint64_t{1} << 40)) {
        iterations *= 2;
        s = seconds_of(fn, iterations);
    }
    return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(iterations * trial_ms / 1000.0 / s)));
}

// The CPUs of this process's affinity mask, in order (empty when it cannot be read).
std::vector<int> allowed_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

// The default team: fresh threads, thread t pinned to cpus[t] when `cpus` is not empty, all
// joined before it returns.
void pinned_team(const std::vector<int>& cpus, int threads, const std::function<void(int)>& body) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> team;
    team.reserve(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        team.emplace_back([&, t] {
            if (!cpus.empty()) {
                cpu_set_t one;
                CPU_ZERO(&one);
                CPU_SET(cpus[static_cast<std::size_t>(t)], &one);
                ::sched_setaffinity(0, sizeof one, &one);  // this thread only; best effort
            }
            ready.fetch_add(1);
            while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
            body(t);
        });
    }
    while (ready.load() < threads) std::this_thread::yield();
    go.store(true, std::memory_order_release);
    for (auto& th : team) th.join();
}

double median_of(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

struct PeakSampler::Impl {
    peak_detail::Kernel f32, bf16;
    std::uint64_t f32_iterations = 0, bf16_iterations = 0;
    std::vector<int> cpus;  // pinned CPUs of the default team (empty: unpinned)
    Team team;
    PeakFlops shape;  // cpu_model, cpus, threads, pinned, isas
    std::vector<double> f32_rates, bf16_rates;
    double probe_ms = 0;

    // One trial: every thread of the team runs `iterations` at once; the sum of their GFLOP/s.
    double trial(const Kernel& kernel, std::uint64_t iterations) const {
        std::vector<double> rates(static_cast<std::size_t>(shape.threads), 0.0);
        team(shape.threads, [&](int t) {
            const double s = seconds_of(kernel.fn, iterations);
            rates.at(static_cast<std::size_t>(t)) =
                kernel.flop_per_iteration * static_cast<double>(iterations) / s / 1e9;
        });
        double sum = 0;
        for (double r : rates) sum += r;
        return sum;
    }
};

PeakSampler::PeakSampler(int threads, double trial_ms, Team team) : impl_(std::make_unique<Impl>()) {
    if (threads < 1) throw std::invalid_argument("peak probe: threads must be >= 1");
    if (!(trial_ms > 0)) throw std::invalid_argument("peak probe: trial_ms must be > 0");
    const auto t0 = Clock::now();
    Impl& m = *impl_;
    PeakFlops& p = m.shape;
    p.cpu_model = cpu_model_name();
    m.cpus = allowed_cpus();
    p.cpus = m.cpus.empty() ? static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))
                            : static_cast<int>(m.cpus.size());
    p.threads = std::min(threads, p.cpus);
    p.pinned = !m.cpus.empty() && !team;
    if (team) {
        m.cpus.clear();
        m.team = std::move(team);
    } else {
        if (p.pinned) m.cpus.resize(static_cast<std::size_t>(p.threads));
        m.team = [cpus = m.cpus](int n, const std::function<void(int)>& body) { pinned_team(cpus, n, body); };
    }
    m.f32 = f32_kernel();
    m.bf16 = bf16_kernel();
    p.f32_isa = m.f32.isa;
    p.bf16_isa = m.bf16.isa;
    if (m.f32.fn != nullptr) m.f32_iterations = calibrate(m.f32.fn, trial_ms);
    if (m.bf16.fn != nullptr) m.bf16_iterations = calibrate(m.bf16.fn, trial_ms);
    m.probe_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

PeakSampler::~PeakSampler() = default;

void PeakSampler::sample() {
    Impl& m = *impl_;
    const auto t0 = Clock::now();
    if (m.f32.fn != nullptr) m.f32_rates.push_back(m.trial(m.f32, m.f32_iterations));
    if (m.bf16.fn != nullptr) m.bf16_rates.push_back(m.trial(m.bf16, m.bf16_iterations));
    m.probe_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int PeakSampler::samples() const {
    return static_cast<int>(std::max(impl_->f32_rates.size(), impl_->bf16_rates.size()));
}

PeakFlops PeakSampler::best() const {
    PeakFlops p = impl_->shape;
    for (double r : impl_->f32_rates) p.f32_gflops = std::max(p.f32_gflops, r);
    for (double r : impl_->bf16_rates) p.bf16_gflops = std::max(p.bf16_gflops, r);
    p.samples = samples();
    p.statistic = "best";
    p.probe_ms = impl_->probe_ms;
    return p;
}

PeakFlops PeakSampler::median() const {
    PeakFlops p = impl_->shape;
    p.f32_gflops = median_of(impl_->f32_rates);
    p.bf16_gflops = median_of(impl_->bf16_rates);
    p.samples = samples();
    p.statistic = "median";
    p.probe_ms = impl_->probe_ms;
    return p;
}

double PeakFlops::gflops_for(const std::string& precision, int run_threads) const {
    const int used = std::clamp(run_threads, 0, std::max(cpus, 1));
    if (precision == "f32") return f32_gflops_per_thread() * used;
    if (precision == "bf16") return bf16_gflops_per_thread() * used;
    return 0.0;
}

nlohmann::json PeakFlops::to_json() const {
    return {
        {"cpu_model", cpu_model}, {"cpus", cpus},
        {"threads", threads},     {"pinned", pinned},
        {"f32_isa", f32_isa},     {"f32_gflops", f32_gflops},
        {"bf16_isa", bf16_isa},   {"bf16_gflops", has_bf16() ? nlohmann::json(bf16_gflops) : nlohmann::json(nullptr)},
        {"samples", samples},     {"statistic", statistic},
        {"probe_ms", probe_ms}};
}

PeakFlops measure_peak_flops(const PeakProbeOptions& o) {
    if (o.trials < 1) throw std::invalid_argument("peak probe: trials must be >= 1");
    PeakSampler sampler(o.threads, o.trial_ms);
    for (int i = 0; i < o.trials; ++i) sampler.sample();
    return sampler.best();
}

std::string cpu_model_name(std::istream& cpuinfo) {
    for (std::string line; std::getline(cpuinfo, line);) {
        if (line.rfind("model name", 0) != 0) continue;
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        const auto first = line.find_first_not_of(" \t", colon + 1);
        if (first == std::string::npos) continue;
        const auto last = line.find_last_not_of(" \t\r");
        return line.substr(first, last - first + 1);
    }
    return "unknown";
}

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    return cpu_model_name(in);
}

double loadavg_1m() {
    std::ifstream in("/proc/loadavg");
    double load = -1;
    in >> load;
    return load;
}

nlohmann::json fraction_of_peak(double achieved_gflops, double peak_gflops) {
    if (!(peak_gflops > 0)) return nullptr;
    return achieved_gflops / peak_gflops;
}

}  // namespace psrun
