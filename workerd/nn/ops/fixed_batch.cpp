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

// P: the data's values before its batch axis a.
std::int64_t values_before(const Dims& data, int a) {
    std::int64_t before = 1;
    for (int i = 0; i < a; ++i) before *= data[static_cast<std::size_t>(i)].value;
    return before;
}

// A kN axis holds the batch after `outer` of its k, one of k's divisors, ascending (1 first:
// view(L, b * heads, d) puts the batch outside; view(L * b, E) read back puts it inside L).
std::vector<std::int64_t> divisors(std::int64_t k) {
    std::vector<std::int64_t> out;
    for (std::int64_t d = 1; d <= k / d; ++d)
        if (k % d == 0) {
            out.push_back(d);
            if (d != k / d) out.push_back(k / d);
        }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

std::vector<Dims> reshape_readings_at_batch_one(const Dims& data, const Dims& target) {
    const int a = batch_axis(data);
    if (a < 0 || target.empty()) return {};
    const auto t = resolved(data, target, 1);
    if (!t) return {};
    const std::int64_t before = values_before(data, a);
    // Each axis j that can hold the batch, ranked as the header says (lower first).
    std::vector<int> rank(t->size(), -1);
    const std::size_t last = t->size() - 1;
    for (const std::int64_t outer : divisors(data[static_cast<std::size_t>(a)].value)) {
        const std::int64_t p = before * outer;
        std::int64_t prefix = 1;  // product of t[0..j)
        for (std::size_t j = 0; j < t->size() && p % prefix == 0; ++j) {
            const std::int64_t through = prefix * (*t)[j];
            if (through % p == 0) {
                const int r = prefix != p ? (j == last ? 3 : 2) : (*t)[j] == 1 ? 0 : (j == last ? 3 : 1);
                if (rank[j] < 0 || r < rank[j]) rank[j] = r;
            }
            prefix = through;
        }
    }
    std::vector<std::size_t> axes;
    for (std::size_t j = 0; j < rank.size(); ++j)
        if (rank[j] >= 0) axes.push_back(j);
    std::stable_sort(axes.begin(), axes.end(), [&](std::size_t x, std::size_t y) { return rank[x] < rank[y]; });
    std::vector<Dims> readings;
    for (const std::size_t j : axes) {
        Dims out;
        for (const auto v : *t) out.push_back(Dim::of(v));
        out[j] = Dim::batch_times((*t)[j]);
        readings.push_back(std::move(out));
    }
    return readings;
}

std::optional<Dims> reshape_target_at_fixed_batch(const Dims& data, const Dims& target, std::int64_t b) {
    const int a = batch_axis(data);
    if (b < 1 || a < 0 || target.empty()) return std::nullopt;
    if (b == 1) {
        auto readings = reshape_readings_at_batch_one(data, target);
        if (readings.empty()) return std::nullopt;
        return std::move(readings.front());
    }
    const auto t = resolved(data, target, b);
    if (!t) return std::nullopt;
    const std::int64_t before = values_before(data, a);
    for (const std::int64_t outer : divisors(data[static_cast<std::size_t>(a)].value)) {
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

// True when shape[i] broadcasts a data dim of 1, or none (data aligned from the right).
bool over_one(const Dims& data, const Dims& shape, std::size_t i) {
    const std::size_t from_end = shape.size() - 1 - i;
    return from_end >= data.size() || data[data.size() - 1 - from_end] == Dim::of(1);
}

// `shape` with axis i the batch N.
Dims with_batch_at(Dims shape, std::size_t i) {
    shape[i] = Dim::batch_times(1);
    return shape;
}

}  // namespace

std::vector<Dims> expand_readings_at_batch_one(const Dims& data, const Dims& shape) {
    if (std::any_of(data.begin(), data.end(), [](const Dim& d) { return d.batch; })) return {};
    std::vector<Dims> readings;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == Dim::of(1) && over_one(data, shape, i)) readings.push_back(with_batch_at(shape, i));
    }
    return readings;
}

std::optional<Dims> expand_shape_at_fixed_batch(const Dims& data, const Dims& shape, std::int64_t b) {
    if (b < 1 || std::any_of(data.begin(), data.end(), [](const Dim& d) { return d.batch; })) return std::nullopt;
    if (b == 1) {
        auto readings = expand_readings_at_batch_one(data, shape);
        if (readings.empty()) return std::nullopt;
        return std::move(readings.front());
    }
    const int at = single_batch_entry(shape, b, [&](std::size_t i) { return over_one(data, shape, i); });
    if (at < 0) return std::nullopt;
    return with_batch_at(shape, static_cast<std::size_t>(at));
}

std::optional<Dims> fill_shape_at_fixed_batch(const Dims& shape, std::int64_t b) {
    if (b < 2 || shape.size() < 2) return std::nullopt;  // a vector of b values is a shape or an index list
    const int at = single_batch_entry(shape, b, [](std::size_t) { return true; });
    if (at < 0) return std::nullopt;
    return with_batch_at(shape, static_cast<std::size_t>(at));
}

std::vector<Dims> fill_readings_at_batch_one(const Dims& shape) {
    std::vector<Dims> readings;
    if (shape.size() < 2) return readings;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == Dim::of(1)) readings.push_back(with_batch_at(shape, i));
    }
    return readings;
}

}  // namespace psrun::nn
