#include "workerd/nn/ops/fixed_batch.h"

#include <algorithm>

namespace psrun::nn {
namespace {

constexpr std::int64_t kMaxProduct = std::int64_t{1} << 50;

// acc *= v for v >= 1; false when the product passes kMaxProduct (acc then unspecified).
bool multiply(std::int64_t& acc, std::int64_t v) {
    return v >= 1 && !__builtin_mul_overflow(acc, v, &acc) && acc <= kMaxProduct;
}

// The data's one batch axis (N or kN), or -1.
int batch_axis(const Dims& data) {
    int axis = -1;
    for (std::size_t i = 0; i < data.size(); ++i) {
        if (!data[i].batch) continue;
        if (axis >= 0) return -1;
        axis = static_cast<int>(i);
    }
    return axis;
}

// `target` at batch b: 0 copies the data's dim, one -1 takes what is left; nullopt when it does
// not resolve to positive dims holding the data's values.
std::optional<std::vector<std::int64_t>> resolved(const Dims& data, const Dims& target, std::int64_t b) {
    std::int64_t total = 1;
    for (const auto& d : data) {
        std::int64_t n = d.value;
        if (d.batch && !multiply(n, b)) return std::nullopt;
        if (!multiply(total, n)) return std::nullopt;
    }
    std::vector<std::int64_t> out;
    int infer = -1;
    std::int64_t known = 1;
    for (std::size_t i = 0; i < target.size(); ++i) {
        if (target[i].batch) return std::nullopt;
        std::int64_t v = target[i].value;
        if (v == 0) {  // data[i] at batch b: within the total above
            if (i >= data.size()) return std::nullopt;
            v = data[i].at(b);
        }
        if (v == -1) {
            if (infer >= 0) return std::nullopt;
            infer = static_cast<int>(i);
        } else if (v < 1) {
            return std::nullopt;
        } else if (!multiply(known, v)) {
            return std::nullopt;
        }
        out.push_back(v);
    }
    if (infer >= 0) {
        if (total % known != 0) return std::nullopt;
        out[static_cast<std::size_t>(infer)] = total / known;
    } else if (known != total) {
        return std::nullopt;
    }
    return out;
}

}  // namespace

std::optional<Dims> reshape_target_at_fixed_batch(const Dims& data, const Dims& target, std::int64_t b) {
    const int a = batch_axis(data);
    if (b < 1 || a < 0 || target.empty()) return std::nullopt;
    if (b == 1) {
        if (a != 0 || data[0] != Dim::batch_times(1) || target[0].batch || target[0].value != 1) return std::nullopt;
        Dims out = target;
        out[0] = Dim::batch_times(1);
        return out;
    }
    const auto t = resolved(data, target, b);
    if (!t) return std::nullopt;
    std::int64_t before = 1;  // P: the data's values before its batch axis
    for (int i = 0; i < a; ++i) before *= data[static_cast<std::size_t>(i)].value;
    // A kN axis holds the batch after `outer` of its k (1 first: view(L, b * heads, d) puts the
    // batch outside; view(L * b, E) read back puts it inside L).
    const std::int64_t k = data[static_cast<std::size_t>(a)].value;
    std::vector<std::int64_t> outers;  // the divisors of k, ascending
    for (std::int64_t d = 1; d <= k / d; ++d)
        if (k % d == 0) {
            outers.push_back(d);
            if (d != k / d) outers.push_back(k / d);
        }
    std::sort(outers.begin(), outers.end());
    for (const std::int64_t outer : outers) {
        const std::int64_t p = before * outer;  // within the total: p x b x the rest
        std::int64_t prefix = 1;                // product of t[0..j)
        for (std::size_t j = 0; j < t->size() && p % prefix == 0; ++j) {
            const std::int64_t through = prefix * (*t)[j];
            if (through % (p * b) == 0) {  // then b divides t[j]: p / prefix x b x the rest
                Dims out;
                for (const auto v : *t) out.push_back(Dim::of(v));
                out[j] = Dim::batch_times((*t)[j] / b);
                return out;
            }
            prefix = through;
        }
    }
    return std::nullopt;
}

namespace {

// The one entry of `shape` equal to b >= 2 for which `allowed(i)` holds; -1 for none or several.
template <typename Allowed>
int single_batch_entry(const Dims& shape, std::int64_t b, Allowed allowed) {
    int at = -1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (shape[i].batch) return -1;
        if (shape[i].value != b || !allowed(i)) continue;
        if (at >= 0) return -1;
        at = static_cast<int>(i);
    }
    return at;
}

}  // namespace

std::optional<Dims> expand_shape_at_fixed_batch(const Dims& data, const Dims& shape, std::int64_t b) {
    if (b < 1 || std::any_of(data.begin(), data.end(), [](const Dim& d) { return d.batch; })) return std::nullopt;
    int at = -1;
    if (b == 1) {
        if (!data.empty() && data[0] == Dim::of(1) && !shape.empty() && shape[0] == Dim::of(1)) at = 0;
    } else {
        at = single_batch_entry(shape, b, [&](std::size_t i) {
            const std::size_t from_end = shape.size() - 1 - i;
            return from_end >= data.size() || data[data.size() - 1 - from_end] == Dim::of(1);
        });
    }
    if (at < 0) return std::nullopt;
    Dims out = shape;
    out[static_cast<std::size_t>(at)] = Dim::batch_times(1);
    return out;
}

std::optional<Dims> fill_shape_at_fixed_batch(const Dims& shape, std::int64_t b) {
    if (b < 2 || shape.size() < 2) return std::nullopt;  // a vector of b values is a shape or an index list
    const int at = single_batch_entry(shape, b, [](std::size_t) { return true; });
    if (at < 0) return std::nullopt;
    Dims out = shape;
    out[static_cast<std::size_t>(at)] = Dim::batch_times(1);
    return out;
}

}  // namespace psrun::nn
