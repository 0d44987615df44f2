// Which of this CPU's instruction sets psrun's own code may use, under the cap oneDNN reads:
// ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA). One variable thus runs oneDNN's code, the hand kernels
// and the peak probe (common/peak_flops.h) on the AVX2 paths of an AVX-512 host, as test/run.sh
// does to check what AVX2 nodes run, and the fractions of the peak such a run prints are of the
// AVX2 peak its code can reach. Thread safety: the process-wide answers are computed once (the
// environment read at the first call); cap_allows() is pure.
#pragma once

#include <string_view>

namespace psrun {

enum class IsaLevel {
    kAvx2,        // AVX2 with FMA (oneDNN's AVX2 and above)
    kAvx512,      // AVX-512F (oneDNN's AVX512_CORE and above)
    kAvx512Bf16,  // AVX-512 with the BF16 dot products (oneDNN's AVX512_CORE_BF16 and above)
};

// Whether a cap value (oneDNN's names, any case: "AVX2", "AVX512_CORE", "AVX512_CORE_BF16",
// "AVX512_CORE_AMX", "ALL"; empty: no cap) lets code of `level` run. A name oneDNN does not
// know caps everything: only AVX2*, AVX512* and ALL allow AVX2, only AVX512* and ALL AVX-512.
bool cap_allows(std::string_view cap, IsaLevel level);

// The CPU has AVX2 and FMA and no cap below AVX2 (AVX, SSE41) is set.
bool avx2_allowed();
// The CPU has AVX-512F and no cap below AVX-512 is set.
bool avx512_allowed();
// The CPU has AVX-512F and AVX512-BF16 and no cap below AVX512_CORE_BF16 is set.
bool avx512_bf16_allowed();

}  // namespace psrun
