#include "workerd/onnx/onnx_consts_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace psrun::onnx_io::consts_detail {

Result<Outputs> evaluate_layout(const onnx::NodeProto& node, std::int64_t opset, const std::vector<const Known*>& in) {
    const std::string& op = node.op_type();
    const Known& a = *in[0];
    if (op == "Unsqueeze" || op == "Squeeze") {
        PSRUN_TRY_ASSIGN(auto axes, axes_of(node, opset, in, 1));
        Known out = a;
        if (op == "Unsqueeze") {
            const auto rank = static_cast<std::int64_t>(a.dims.size() + axes.size());
            std::vector<std::int64_t> sorted;
            for (auto x : axes) sorted.push_back(normalize_axis(x, rank));
            std::sort(sorted.begin(), sorted.end());
            for (const auto x : sorted) {
                if (x < 0 || x > static_cast<std::int64_t>(out.dims.size()))
                    return tl::unexpected(bad(node, "axis out of range"));
                out.dims.insert(out.dims.begin() + x, 1);
            }
        } else {
            const auto rank = static_cast<std::int64_t>(a.dims.size());
            std::vector<std::int64_t> keep;
            for (std::int64_t d = 0; d < rank; ++d) {
                bool drop = axes.empty() ? a.dims[static_cast<std::size_t>(d)] == 1 : false;
                for (auto x : axes) drop = drop || normalize_axis(x, rank) == d;
                if (!drop) keep.push_back(a.dims[static_cast<std::size_t>(d)]);
            }
            out.dims = keep;
        }
        return Outputs{{out}};
    }
    if (op == "Concat") {
        PSRUN_TRY_ASSIGN(auto axis, int_attr(node, "axis", 0));
        const auto rank = static_cast<std::int64_t>(a.dims.size());
        const std::int64_t ax = normalize_axis(axis, rank);
        if (ax < 0 || ax >= rank) return tl::unexpected(bad(node, "axis out of range"));
        std::vector<std::int64_t> dims = a.dims;
        dims[static_cast<std::size_t>(ax)] = 0;
        for (const auto* k : in) {
            if (k == nullptr || k->symbolic_dims || k->is_float != a.is_float || k->dims.size() != a.dims.size())
                return Outputs{};
            dims[static_cast<std::size_t>(ax)] += k->dims[static_cast<std::size_t>(ax)];
        }
        const auto s = strides_of(dims);
        Known out;
        out.dims = dims;
        out.is_float = a.is_float;
        const auto n = product(dims);
        for (std::int64_t e = 0; e < n; ++e) {
            std::int64_t coord = (e / s[static_cast<std::size_t>(ax)]) % dims[static_cast<std::size_t>(ax)];
            for (const auto* k : in) {
                const auto len = k->dims[static_cast<std::size_t>(ax)];
                if (coord < len) {
                    auto kd = dims;
                    kd[static_cast<std::size_t>(ax)] = len;
                    // The element's coordinates in k.
                    const auto ks = strides_of(kd);
                    std::int64_t idx = 0;
                    for (std::size_t d = 0; d < dims.size(); ++d) {
                        const std::int64_t c = d == static_cast<std::size_t>(ax) ? coord : (e / s[d]) % dims[d];
                        idx += c * ks[d];
                    }
                    copy_element(*k, static_cast<std::size_t>(idx), out);
                    break;
                }
                coord -= len;
            }
        }
        return Outputs{{out}};
    }
    if (op == "Gather") {
        if (in.size() < 2 || in[1] == nullptr) return Outputs{};
        PSRUN_TRY_ASSIGN(auto axis, int_attr(node, "axis", 0));
        const auto rank = static_cast<std::int64_t>(a.dims.size());
        const std::int64_t ax = normalize_axis(axis, rank);
        if (ax < 0 || ax >= rank) return tl::unexpected(bad(node, "axis out of range"));
        auto idx = in[1]->plain_ints();
        if (!idx) return Outputs{};
        const auto len = a.dims[static_cast<std::size_t>(ax)];
        for (auto& x : *idx) {
            if (x < -len || x >= len) return tl::unexpected(bad(node, "index " + std::to_string(x) + " out of range"));
            if (x < 0) x += len;
        }
        std::vector<std::int64_t> dims(a.dims.begin(), a.dims.begin() + ax);
        dims.insert(dims.end(), in[1]->dims.begin(), in[1]->dims.end());
        dims.insert(dims.end(), a.dims.begin() + ax + 1, a.dims.end());
        if (product(dims) > kMaxKnownElements) return Outputs{};
        const auto inner = product(std::vector<std::int64_t>(a.dims.begin() + ax + 1, a.dims.end()));
        const auto count = static_cast<std::int64_t>(idx->size());
        return Outputs{{gather_elements(a, dims, [&](std::int64_t e) {
            const std::int64_t o = e / (count * inner), j = (e / inner) % count, r = e % inner;
            return static_cast<std::size_t>((o * len + (*idx)[static_cast<std::size_t>(j)]) * inner + r);
        })}};
    }
    if (op == "Slice") {
        if (opset < 10 || in.size() < 3 || in[1] == nullptr || in[2] == nullptr) return Outputs{};
        auto starts = in[1]->plain_ints();
        auto ends = in[2]->plain_ints();
        if (!starts || !ends) return Outputs{};
        std::vector<std::int64_t> axes(starts->size()), steps(starts->size(), 1);
        std::iota(axes.begin(), axes.end(), 0);
        if (in.size() > 3 && in[3] != nullptr) axes = in[3]->plain_ints().value_or(axes);
        if (in.size() > 4 && in[4] != nullptr) steps = in[4]->plain_ints().value_or(steps);
        const auto rank = static_cast<std::int64_t>(a.dims.size());
        std::vector<std::int64_t> begin(a.dims.size(), 0), step(a.dims.size(), 1), dims = a.dims;
        for (std::size_t k = 0; k < axes.size() && k < starts->size() && k < ends->size() && k < steps.size(); ++k) {
            const std::int64_t ax = normalize_axis(axes[k], rank);
            if (ax < 0 || ax >= rank || steps[k] == 0) return tl::unexpected(bad(node, "bad axes or steps"));
            const auto len = a.dims[static_cast<std::size_t>(ax)];
            auto clamp = [&](std::int64_t v, bool is_end) {
                if (v < 0) v += len;
                if (steps[k] > 0) return std::clamp<std::int64_t>(v, 0, len);
                return std::clamp<std::int64_t>(v, -1, len - 1) + (is_end ? 0 : 0);
            };
            const auto s = clamp((*starts)[k], false), e = clamp((*ends)[k], true);
            // Elements from s towards e (s, e within [-1, len]); no overflow for any step a file gives.
            const std::int64_t span = steps[k] > 0 ? e - s : s - e;
            const std::int64_t stride = steps[k] > 0 ? steps[k]
                                        : steps[k] == std::numeric_limits<std::int64_t>::min()
                                            ? std::numeric_limits<std::int64_t>::max()
                                            : -steps[k];
            const auto count = span <= 0 ? std::int64_t{0} : (span - 1) / stride + 1;
            begin[static_cast<std::size_t>(ax)] = s;
            step[static_cast<std::size_t>(ax)] = steps[k];
            dims[static_cast<std::size_t>(ax)] = count;
        }
        const auto as = strides_of(a.dims);
        const auto os = strides_of(dims);
        return Outputs{{gather_elements(a, dims, [&](std::int64_t e) {
            std::int64_t idx = 0;
            for (std::size_t d = 0; d < dims.size(); ++d) idx += (begin[d] + ((e / os[d]) % dims[d]) * step[d]) * as[d];
            return static_cast<std::size_t>(idx);
        })}};
    }
    if (op == "Reshape") {
        if (in.size() < 2 || in[1] == nullptr) return Outputs{};
        auto shape = in[1]->plain_ints();
        if (!shape) return Outputs{};
        std::vector<std::int64_t> dims;
        std::int64_t known = 1, infer = -1;
        for (std::size_t k = 0; k < shape->size(); ++k) {
            std::int64_t d = (*shape)[k];
            if (d == 0 && k < a.dims.size()) d = a.dims[k];
            if (d == -1) {
                infer = static_cast<std::int64_t>(k);
                dims.push_back(1);
                continue;
            }
            if (d < 0 || __builtin_mul_overflow(known, d, &known)) return tl::unexpected(bad(node, "bad shape"));
            dims.push_back(d);
        }
        const auto total = product(a.dims);
        if (infer >= 0 && known != 0) dims[static_cast<std::size_t>(infer)] = total / known;
        if (product(dims) != total) return tl::unexpected(bad(node, "the shape does not keep the element count"));
        Known out = a;
        out.dims = dims;
        return Outputs{{out}};
    }
    if (op == "Transpose") {
        PSRUN_TRY_ASSIGN(auto perm, ints_attr(node, "perm"));
        std::vector<std::int64_t> p(a.dims.size());
        std::iota(p.rbegin(), p.rend(), 0);
        if (perm) p = *perm;
        if (p.size() != a.dims.size()) return tl::unexpected(bad(node, "perm does not match the rank"));
        std::vector<bool> seen(p.size(), false);
        for (const auto x : p) {
            if (x < 0 || x >= static_cast<std::int64_t>(p.size()) || seen[static_cast<std::size_t>(x)])
                return tl::unexpected(bad(node, "perm " + ints_text(p) + " is not a permutation of the axes"));
            seen[static_cast<std::size_t>(x)] = true;
        }
        std::vector<std::int64_t> dims;
        for (const auto x : p) dims.push_back(a.dims[static_cast<std::size_t>(x)]);
        const auto as = strides_of(a.dims);
        const auto os = strides_of(dims);
        return Outputs{{gather_elements(a, dims, [&](std::int64_t e) {
            std::int64_t idx = 0;
            for (std::size_t d = 0; d < dims.size(); ++d)
                idx += ((e / os[d]) % dims[d]) * as[static_cast<std::size_t>(p[d])];
            return static_cast<std::size_t>(idx);
        })}};
    }
    if (op == "Expand") {
        if (in.size() < 2 || in[1] == nullptr) return Outputs{};
        auto shape = in[1]->plain_ints();
        bool uniform = a.size() >= 1 && !a.symbolic_dims;
        for (std::size_t e = 1; uniform && e < a.size(); ++e) uniform = as_double(a, e) == as_double(a, 0);
        if (!shape && uniform && !in[1]->is_float && !in[1]->symbolic_dims) {
            // One value to a batch-dependent shape: a fill (a padding mask's zeros). Also a
            // constant of equal values whose dims clash with the batch (torch.onnx's zero initial
            // state of a packed sequence, [1, 6, H] traced at a batch of 6, expanded to
            // [1, N, H]): what the file computes at its traced batch, at every batch.
            const std::size_t rank = std::max(a.dims.size(), in[1]->i.size());
            Known out;
            out.is_float = a.is_float;
            out.symbolic_dims = nn::Dims(rank, Dim{1});
            for (std::size_t k = 0; k < rank; ++k) {
                const std::size_t from_end = rank - 1 - k;
                const bool in_shape = from_end < in[1]->i.size();
                const Dim wanted = in_shape ? in[1]->i[in[1]->i.size() - 1 - from_end] : Dim{1};
                const std::int64_t own = from_end < a.dims.size() ? a.dims[a.dims.size() - 1 - from_end] : 1;
                (*out.symbolic_dims)[k] = wanted.batch || wanted.value != 1 ? wanted : Dim{own};
            }
            out.fill = as_double(a, 0);
            return Outputs{{out}};
        }
        if (!shape) return Outputs{};
        auto dims = broadcast_dims(a.dims, *shape);
        if (!dims) return tl::unexpected(bad(node, "the shape does not broadcast"));
        if (product(*dims) > kMaxKnownElements) return Outputs{};
        return Outputs{{gather_elements(a, *dims, [&](std::int64_t e) { return broadcast_index(e, *dims, a.dims); })}};
    }
    if (op == "ConstantOfShape") {
        double fill = 0.0;
        bool is_float = true;
        if (const auto* v = find_attribute(node, "value"); v != nullptr && v->has_t()) {
            PSRUN_TRY_ASSIGN(auto k, known_from_tensor(v->t()));
            if (k.size() != 1) return tl::unexpected(bad(node, "value must hold one element"));
            is_float = k.is_float;
            fill = as_double(k, 0);
        }
        std::vector<std::int64_t> dims;
        nn::Dims symbolic;
        bool batch = false;
        for (const auto& d : a.i) {
            if (d.value < 0) return tl::unexpected(bad(node, "negative dimension"));
            batch = batch || d.batch;
            symbolic.push_back(d);
            dims.push_back(d.value);
        }
        Known out;
        out.is_float = is_float;
        if (batch) {
            out.symbolic_dims = symbolic;
            out.fill = fill;
            return Outputs{{out}};
        }
        if (product(dims) > kMaxKnownElements) return Outputs{};
        out.dims = dims;
        const auto n = static_cast<std::size_t>(product(dims));
        if (is_float) out.f.assign(n, fill);
        else out.i.assign(n, Dim{saturate_int(fill)});
        return Outputs{{out}};
    }
    if (op == "Range") {
        if (in.size() < 3 || in[1] == nullptr || in[2] == nullptr) return Outputs{};
        if (a.symbolic_dims || in[1]->symbolic_dims || a.size() != 1 || in[1]->size() != 1 || in[2]->size() != 1)
            return Outputs{};
        const bool is_float = a.is_float;
        if (!is_float && (a.i[0].batch || in[1]->i[0].batch || in[2]->i[0].batch)) return Outputs{};
        const double start = as_double(a, 0), limit = as_double(*in[1], 0), delta = as_double(*in[2], 0);
        if (delta == 0) return tl::unexpected(bad(node, "delta is 0"));
        const auto n = std::max<std::int64_t>(0, saturate_int(std::ceil((limit - start) / delta)));
        if (n > kMaxKnownElements) return Outputs{};
        Known out;
        out.is_float = is_float;
        out.dims = {n};
        for (std::int64_t k = 0; k < n; ++k) {
            const double v = start + static_cast<double>(k) * delta;
            if (is_float) out.f.push_back(v);
            else out.i.push_back(Dim{saturate_int(v)});
        }
        return Outputs{{out}};
    }
    return Outputs{};
}

}  // namespace psrun::onnx_io::consts_detail
