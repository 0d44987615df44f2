// Subnormal floats flushed to zero (FTZ) and read as zero (DAZ) on x86.
//
// Why: Adam's first moment decays by beta1 at every step for a parameter whose gradient is zero
// (a dead ReLU unit's weights), so after ~700 steps it is subnormal, and x86 computes with
// subnormals ~25x slower. Measured in a 3,000-step `psrun local` run: psd spent 62% of a core,
// 94% of it in Optimizer::apply_range, from step ~700 on. TensorFlow runs its kernels with the
// same flags; values below 1.2e-38 do not matter to training.
//
// Contract: sets the calling thread's MXCSR; threads it creates afterwards inherit it (Linux
// copies the FPU state at clone), so call it first thing in main(), before any thread starts.
#pragma once

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace psrun {

inline void flush_denormals_to_zero() {
#if defined(__SSE__)
    _mm_setcsr(_mm_getcsr() | 0x8040u);  // bit 15 FTZ, bit 6 DAZ
#endif
}

inline bool denormals_flushed() {
#if defined(__SSE__)
    return (_mm_getcsr() & 0x8040u) == 0x8040u;
#else
    return false;
#endif
}

}  // namespace psrun
