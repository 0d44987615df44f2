// GEMM backends side by side (bench/gemm/main.cpp): oneDNN 2.6's matmul, what psrun's dense
// layers run today, against libxsmm 1.17's JIT batch-reduce GEMM kernels, on the GEMMs of a
// dense layer's step, in bf16 or f32. (OpenBLAS 0.3.21 declares cblas_sbgemm, but Debian 12 builds it without
// BUILD_BFLOAT16: its libopenblas.so exports no sbgemm, so it cannot be compared.)
//
// Every backend computes the same row-major product C[M x N] (f32) = op(A)[M x K] op(B)[K x N]
// from bf16 or f32 operands (Gemm below), so one reference checks them all. Threads: the OpenMP team
// (omp_set_num_threads() before use); a backend is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace psrun::bench {

// Operands as psrun holds them: A stored [M x K] row-major, or [K x M] when `a_trans` (op(A) is
// its transpose); B stored [K x N], or [N x K] when `b_trans`. `a` and `b` point to floats, or
// with `bf16` to std::uint16_t (a bf16 as a float's 16 high bits).
struct Gemm {
    std::int64_t m = 0, n = 0, k = 0;
    bool a_trans = false, b_trans = false;
    bool bf16 = true;
    const void* a = nullptr;
    const void* b = nullptr;
    float* c = nullptr;  // [M x N] row-major, overwritten
};

class GemmBackend {
  public:
    virtual ~GemmBackend() = default;
    // The library's name as the JSON lines print it.
    virtual std::string name() const = 0;
    // Set up for `g` (primitives created, kernels generated, buffers sized): not timed. False
    // when the library cannot do this GEMM here (`why` says why).
    virtual bool prepare(const Gemm& g, std::string& why) = 0;
    // One product into g.c, with whatever reordering of the operands it needs counted.
    virtual void run() = 0;
};

std::unique_ptr<GemmBackend> make_onednn_backend();
// libxsmm: op(B) packed into blocks (bf16: VNNI pairs; f32: only where it is stored transposed)
// and op(A) made row-major each run (`prepacked`: the packing done once in prepare(), as if
// fused into the conversion of the weights, the kernels alone timed).
std::unique_ptr<GemmBackend> make_libxsmm_backend(bool bf16, bool prepacked);
// The code path libxsmm's JIT targets on this host ("clx", "cpx", "hsw", ...).
std::string libxsmm_target();

// Round-to-nearest-even f32 -> bf16.
std::uint16_t to_bf16(float x);

}  // namespace psrun::bench
