// The ISA cap (common/cpu_isa.h) as oneDNN names its levels, and the peak probe under it: a run
// capped at AVX2 measures the AVX2 + FMA peak and no bf16 peak (the process-wide answers are
// read once, so the capped case runs in a child process of this program).
#include "common/cpu_isa.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>

#include "common/peak_flops.h"

using psrun::cap_allows;
using psrun::IsaLevel;

TEST_CASE("cpu_isa: a cap lets through the levels at or below it", "[cpu_isa]") {
    for (const char* none : {"", "ALL", "all"}) {
        CHECK(cap_allows(none, IsaLevel::kAvx2));
        CHECK(cap_allows(none, IsaLevel::kAvx512));
        CHECK(cap_allows(none, IsaLevel::kAvx512Bf16));
    }
    for (const char* avx2 : {"AVX2", "avx2", "AVX2_VNNI", "AVX512_CORE"}) CHECK(cap_allows(avx2, IsaLevel::kAvx2));
    for (const char* below : {"AVX", "SSE41", "nonsense"}) CHECK_FALSE(cap_allows(below, IsaLevel::kAvx2));
    for (const char* below : {"AVX2", "avx2", "AVX", "SSE41", "AVX2_VNNI", "nonsense"}) {
        CHECK_FALSE(cap_allows(below, IsaLevel::kAvx512));
        CHECK_FALSE(cap_allows(below, IsaLevel::kAvx512Bf16));
    }
    for (const char* avx512 : {"AVX512_CORE", "avx512_core_vnni", "AVX512_CORE_FP16"}) {
        CHECK(cap_allows(avx512, IsaLevel::kAvx512));
        CHECK_FALSE(cap_allows(avx512, IsaLevel::kAvx512Bf16));
    }
    for (const char* bf16 : {"AVX512_CORE_BF16", "avx512_core_amx", "AVX512_CORE_AMX_FP16"}) {
        CHECK(cap_allows(bf16, IsaLevel::kAvx512));
        CHECK(cap_allows(bf16, IsaLevel::kAvx512Bf16));
    }
}

// Run by the next case in a fresh process of this program with the cap set (the answers are read
// once per process, and other cases have read them here already).
TEST_CASE("cpu_isa: capped at AVX2 (child process)", "[.cpu_isa_capped]") {
    REQUIRE(std::getenv("ONEDNN_MAX_CPU_ISA") != nullptr);
    CHECK_FALSE(psrun::avx512_allowed());
    CHECK_FALSE(psrun::avx512_bf16_allowed());
    CHECK(psrun::avx2_allowed());  // the build's baseline, x86-64-v3
    const psrun::PeakFlops p = psrun::measure_peak_flops({.threads = 1, .trial_ms = 2, .trials = 1});
    CHECK(p.f32_isa == "avx2+fma");  // the build's baseline, x86-64-v3, has AVX2 + FMA
    CHECK(p.f32_gflops > 0);
    CHECK(p.bf16_isa == "none");
    CHECK_FALSE(p.has_bf16());
}

TEST_CASE("cpu_isa: the peak probe follows the cap", "[cpu_isa]") {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 1);
        execl("/proc/self/exe", "test_peak_flops", "[.cpu_isa_capped]", static_cast<char*>(nullptr));
        _exit(127);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);  // Catch: the number of failed checks
    if (std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr && std::getenv("DNNL_MAX_CPU_ISA") == nullptr &&
        __builtin_cpu_supports("avx512f")) {  // uncapped here: AVX-512 where the CPU has it
        CHECK(psrun::avx512_allowed());
        CHECK(psrun::measure_peak_flops({.threads = 1, .trial_ms = 2, .trials = 1}).f32_isa == "avx512f");
    }
}
