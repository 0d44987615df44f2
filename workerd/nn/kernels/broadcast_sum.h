// The sum of a broadcast element-wise op's full-size gradient back to the shape of an input
// that broadcast (a bias [C] added to [N, H, W, C], a scale [C, 1, 1] multiplied into
// [N, C, H, W]): out[j] = scale * sum over the broadcast axes of a (optionally times b, the
// other factor of a product, so that mul's dB = sum(dC * A) is one pass).
//
// Why not oneDNN's reduction primitive: 2.6 runs the reference implementation for these plain
// layouts, 15-40x slower than the memory traffic allows (a [128, 7, 7, 128] bias gradient took
// 18 ms; docs/benchmarks.md). This is one pass over the input at memory speed.
//
// Sums in double (each output adds up to N * H * W products), per thread over a static share
// of the rows, then the threads' partial sums in thread order: the result depends on the
// thread count, not on scheduling.
//
// Threading: OpenMP over the current thread count; one run() at a time per object.
#pragma once

#include <cstdint>
#include <vector>

namespace psrun::nn::kernels {

class BroadcastSum {
  public:
    // `from` and `to` are row-major dims of the same rank, each to[d] equal to from[d] or 1.
    // REQUIRES: that (std::invalid_argument otherwise).
    BroadcastSum(const std::vector<std::int64_t>& from, const std::vector<std::int64_t>& to);

    // to = scale * sum(a [* b]) over the broadcast axes. a and b (nullptr: none) hold
    // element_count(from) floats, to element_count(to). Overwrites to.
    void run(const float* a, const float* b, float* to, float scale);

  private:
    struct Run {
        std::int64_t size;        // elements along this run of merged axes
        std::int64_t out_stride;  // 0 where the run is summed over
    };
    void sum_rows(const float* a, const float* b, std::int64_t row0, std::int64_t row1, double* acc) const;

    std::vector<Run> outer_;  // the runs before the innermost one
    std::int64_t inner_ = 1;  // the innermost run's size
    bool inner_kept_ = true;  // true: the innermost run is kept (a vector add), false: summed
    std::int64_t rows_ = 1;   // product of outer_'s sizes
    std::int64_t out_count_ = 1;
    std::vector<double> partial_;  // threads x out_count_
};

}  // namespace psrun::nn::kernels
