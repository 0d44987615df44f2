#include "launcher/cmd_doctor.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <dnnl.hpp>

#include "common/peak_flops.h"
#include "common/result.h"
#include "workerd/nn/kernel.h"
#include "workerd/nn/kernels/conv1_pool.h"

namespace psrun::launcher {

namespace {

std::string onednn_isa_name(dnnl::cpu_isa isa) {
    using I = dnnl::cpu_isa;
    const std::vector<std::pair<I, const char*>> names = {
        {I::sse41, "SSE4.1"},
        {I::avx, "AVX"},
        {I::avx2, "AVX2"},
        {I::avx2_vnni, "AVX2 + VNNI"},
        {I::avx512_core, "AVX-512"},
        {I::avx512_core_vnni, "AVX-512 + VNNI"},
        {I::avx512_core_bf16, "AVX-512 + BF16"},
        {I::avx512_core_amx, "AVX-512 + AMX"},
    };
    for (const auto& [value, name] : names)
        if (value == isa) return name;
    return "other (" + std::to_string(static_cast<int>(isa)) + ")";
}

void row(const char* what, const std::string& value) { std::printf("%-34s %s\n", what, value.c_str()); }

}  // namespace

void add_doctor_command(CLI::App& app, int& exit_code) {
    CLI::App* doctor = app.add_subcommand("doctor", "the ISA this binary was built for and what it runs on this CPU");
    doctor->callback([&exit_code] {
        // The baseline the build asked for: x86-64-v3 needs AVX2, FMA, BMI2 (checked), v4 AVX-512.
        const std::string build = PSRUN_BUILD_ISA;
        const bool v3 =
            __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
        const bool avx512 = __builtin_cpu_supports("avx512f");
        bool runnable = true;
        if (build == "x86-64-v3") runnable = v3;
        if (build == "x86-64-v4") runnable = v3 && avx512;
        row("CPU", cpu_model_name());
        row("binary built for", build);
        std::string cpu = v3 ? "AVX2 + FMA" : "below x86-64-v3";
        if (avx512) cpu += ", AVX-512F";
        if (__builtin_cpu_supports("avx512bf16")) cpu += ", AVX512-BF16";
        row("this CPU", cpu);
        const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
        row("oneDNN runs", onednn_isa_name(dnnl::get_effective_cpu_isa()) +
                               (cap != nullptr ? std::string(" (ONEDNN_MAX_CPU_ISA=") + cap + ")" : ""));
        const int block = nn::kernels::FusedConv1Pool::block_for(32);
        row("hand-written kernels", block == 16  ? "AVX-512 (16-channel blocks)"
                                    : block == 8 ? "AVX2 + FMA (8-channel blocks)"
                                                 : "off (oneDNN instead)");
        row("bf16 training (--precision bf16)", nn::engine_bf16_supported() ? "native" : "not on this CPU: f32");
        if (!runnable)
            std::printf("this CPU lacks what the build needs (%s): build with -Dmarch= of this CPU's level\n",
                        build.c_str());
        exit_code = runnable ? kExitOk : kExitFailure;
    });
}

}  // namespace psrun::launcher
