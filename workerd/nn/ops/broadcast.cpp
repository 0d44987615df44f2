#include "workerd/nn/ops/broadcast.h"

#include <algorithm>
#include <set>

namespace psrun::nn {

Result<Dims> broadcast_dims(const Dims& a, const Dims& b) {
    const std::size_t rank = std::max(a.size(), b.size());
    Dims out(rank);
    for (std::size_t i = 0; i < rank; ++i) {
        const Dim x = i + a.size() < rank ? Dim::of(1) : a[i + a.size() - rank];
        const Dim y = i + b.size() < rank ? Dim::of(1) : b[i + b.size() - rank];
        if (x == y || y == Dim::of(1)) {
            out[i] = x;
        } else if (x == Dim::of(1)) {
            out[i] = y;
        } else {
            return make_error(ErrorCode::kInvalidArgument,
                              "shapes " + to_string(a) + " and " + to_string(b) + " do not broadcast (dim " +
                                  std::to_string(i) + " of the result: " + x.to_string() + " against " + y.to_string() +
                                  "; each pair must be equal or one of them 1)");
        }
    }
    return out;
}

Result<std::int64_t> normal_axis(std::int64_t axis, std::size_t rank) {
    const auto r = static_cast<std::int64_t>(rank);
    const std::int64_t n = axis < 0 ? axis + r : axis;
    if (n < 0 || n >= r)
        return make_error(ErrorCode::kInvalidArgument, "axis " + std::to_string(axis) + " for rank " +
                                                           std::to_string(rank) + " (expected " + std::to_string(-r) +
                                                           " to " + std::to_string(r - 1) + ")");
    return n;
}

Result<std::vector<std::int64_t>> normal_axes(const std::vector<std::int64_t>& axes, std::size_t rank) {
    std::set<std::int64_t> out;
    for (const auto a : axes) {
        PSRUN_TRY_ASSIGN(auto n, normal_axis(a, rank));
        if (!out.insert(n).second)
            return make_error(ErrorCode::kInvalidArgument, "axis " + std::to_string(a) + " is given twice");
    }
    return std::vector<std::int64_t>(out.begin(), out.end());
}

}  // namespace psrun::nn
