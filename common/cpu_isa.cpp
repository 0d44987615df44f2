#include "common/cpu_isa.h"

#include <cctype>
#include <cstdlib>
#include <string>

namespace psrun {
namespace {

// The cap as set ("" when neither variable is set or both are empty); oneDNN reads ONEDNN_ first.
std::string isa_cap() {
    for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
        const char* cap = std::getenv(name);
        if (cap != nullptr && *cap != '\0') return cap;
    }
    return {};
}

bool cpu_has(IsaLevel level) {
#if defined(__x86_64__)
    if (level == IsaLevel::kAvx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (!__builtin_cpu_supports("avx512f")) return false;
    return level == IsaLevel::kAvx512 || __builtin_cpu_supports("avx512bf16");
#else
    (void)level;
    return false;
#endif
}

}  // namespace

bool cap_allows(std::string_view cap, IsaLevel level) {
    if (cap.empty()) return true;
    std::string v(cap);
    for (char& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (v == "ALL") return true;
    if (level == IsaLevel::kAvx2) return v.starts_with("AVX2") || v.starts_with("AVX512");
    if (level == IsaLevel::kAvx512) return v.starts_with("AVX512");
    return v == "AVX512_CORE_BF16" || v.starts_with("AVX512_CORE_AMX");
}

bool avx2_allowed() {
    static const bool allowed = cpu_has(IsaLevel::kAvx2) && cap_allows(isa_cap(), IsaLevel::kAvx2);
    return allowed;
}

bool avx512_allowed() {
    static const bool allowed = cpu_has(IsaLevel::kAvx512) && cap_allows(isa_cap(), IsaLevel::kAvx512);
    return allowed;
}

bool avx512_bf16_allowed() {
    static const bool allowed = cpu_has(IsaLevel::kAvx512Bf16) && cap_allows(isa_cap(), IsaLevel::kAvx512Bf16);
    return allowed;
}

}  // namespace psrun
