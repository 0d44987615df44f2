#include "workerd/onnx/onnx_consts.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstring>
#include <numeric>

namespace psrun::onnx_io {

namespace {

using nn::Dim;
using Outputs = std::optional<std::vector<Known>>;

Error bad(const onnx::NodeProto& node, const std::string& what) {
    return Error{ErrorCode::kInvalidArgument, "node '" + node.name() + "' (" + node.op_type() + "): " + what};
}

std::int64_t product(const std::vector<std::int64_t>& dims) {
    std::int64_t p = 1;
    for (const auto d : dims) p *= d;
    return p;
}

std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& dims) {
    std::vector<std::int64_t> s(dims.size(), 1);
    for (std::size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
    return s;
}

// Element `flat` of a tensor of `dims` read through broadcasting from a tensor of `from`.
std::size_t broadcast_index(std::int64_t flat, const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& from) {
    const auto s = strides_of(dims);
    const auto fs = strides_of(from);
    std::int64_t idx = 0;
    const std::size_t offset = dims.size() - from.size();
    for (std::size_t d = 0; d < dims.size(); ++d) {
        const std::int64_t coord = (flat / s[d]) % dims[d];
        if (d < offset) continue;
        const std::size_t fd = d - offset;
        if (from[fd] != 1) idx += coord * fs[fd];
    }
    return static_cast<std::size_t>(idx);
}

std::optional<std::vector<std::int64_t>> broadcast_dims(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
    std::vector<std::int64_t> out(std::max(a.size(), b.size()), 1);
    for (std::size_t i = 0; i < out.size(); ++i) {
        const std::int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
        const std::int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
        if (x != y && x != 1 && y != 1) return std::nullopt;
        out[i] = std::max(x, y);
    }
    return out;
}

Known make_ints(std::vector<std::int64_t> dims, std::vector<Dim> values) {
    Known k;
    k.dims = std::move(dims);
    k.i = std::move(values);
    return k;
}

Known make_floats(std::vector<std::int64_t> dims, std::vector<double> values) {
    Known k;
    k.dims = std::move(dims);
    k.is_float = true;
    k.f = std::move(values);
    return k;
}

double as_double(const Known& k, std::size_t i) { return k.is_float ? k.f[i] : static_cast<double>(k.i[i].value); }

// Integer arithmetic where N may appear linearly; nullopt where N's value would be needed.
std::optional<Dim> int_op(const std::string& op, Dim a, Dim b) {
    if (op == "Mul") {
        if (a.batch && b.batch) return std::nullopt;
        return Dim{a.value * b.value, a.batch || b.batch};
    }
    if (op == "Div") {
        if (b.batch || b.value == 0) return std::nullopt;
        if (a.batch && a.value % b.value != 0) return std::nullopt;
        // ONNX integer Div truncates toward zero (as C++).
        return Dim{a.value / b.value, a.batch};
    }
    if (a.batch || b.batch) {
        if (op == "Equal" || op == "Less" || op == "Greater") {
            // N >= 1: a batch multiple equals no constant <= 0 and exceeds it.
            const Dim& c = a.batch ? b : a;
            if (a.batch && b.batch) return op == "Equal" && a.value == b.value ? std::optional(Dim{1}) : std::nullopt;
            if (c.value > 0) return std::nullopt;
            if (op == "Equal") return Dim{0};
            const bool batch_first = a.batch;  // N > c
            return Dim{(op == "Greater") == batch_first ? 1 : 0};
        }
        return std::nullopt;
    }
    if (op == "Add") return Dim{a.value + b.value};
    if (op == "Sub") return Dim{a.value - b.value};
    if (op == "Equal") return Dim{a.value == b.value ? 1 : 0};
    if (op == "Less") return Dim{a.value < b.value ? 1 : 0};
    if (op == "Greater") return Dim{a.value > b.value ? 1 : 0};
    if (op == "Mod" && b.value != 0) return Dim{a.value % b.value};
    return std::nullopt;
}

Result<Outputs> binary(const onnx::NodeProto& node, const Known& a, const Known& b) {
    const std::string& op = node.op_type();
    if (a.symbolic_dims || b.symbolic_dims) return Outputs{};
    const auto dims = broadcast_dims(a.dims, b.dims);
    if (!dims) return tl::unexpected(bad(node, "shapes do not broadcast"));
    const auto n = product(*dims);
    const bool compare = op == "Equal" || op == "Less" || op == "Greater";
    if (a.is_float || b.is_float) {
        std::vector<double> f;
        std::vector<Dim> c;
        for (std::int64_t e = 0; e < n; ++e) {
            const double x = as_double(a, broadcast_index(e, *dims, a.dims));
            const double y = as_double(b, broadcast_index(e, *dims, b.dims));
            if (compare) {
                c.push_back(Dim{op == "Equal" ? x == y : op == "Less" ? x < y : x > y});
                continue;
            }
            if ((!a.is_float && a.i[broadcast_index(e, *dims, a.dims)].batch) ||
                (!b.is_float && b.i[broadcast_index(e, *dims, b.dims)].batch))
                return Outputs{};
            f.push_back(op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : op == "Div" ? x / y : std::pow(x, y));
        }
        if (compare) return Outputs{{make_ints(*dims, c)}};
        return Outputs{{make_floats(*dims, f)}};
    }
    std::vector<Dim> out;
    for (std::int64_t e = 0; e < n; ++e) {
        const auto r = int_op(op, a.i[broadcast_index(e, *dims, a.dims)], b.i[broadcast_index(e, *dims, b.dims)]);
        if (!r) return Outputs{};
        out.push_back(*r);
    }
    return Outputs{{make_ints(*dims, out)}};
}

// A Known's element e (float or int) copied into `to` at position t.
void copy_element(const Known& from, std::size_t e, Known& to) {
    if (from.is_float) to.f.push_back(from.f[e]);
    else to.i.push_back(from.i[e]);
}

Known gather_elements(const Known& data, const std::vector<std::int64_t>& dims, const std::function<std::size_t(std::int64_t)>& source) {
    Known out;
    out.dims = dims;
    out.is_float = data.is_float;
    const auto n = product(dims);
    for (std::int64_t e = 0; e < n; ++e) copy_element(data, source(e), out);
    return out;
}

Result<std::vector<std::int64_t>> axes_of(const onnx::NodeProto& node, std::int64_t opset, const std::vector<const Known*>& in,
                                          std::size_t input) {
    if (opset >= 13 && in.size() > input && in[input] != nullptr) {
        auto v = in[input]->plain_ints();
        if (!v) return tl::unexpected(bad(node, "axes depend on the batch size"));
        return *v;
    }
    auto a = ints_attr(node, "axes");
    if (!a) return tl::unexpected(a.error());
    return a->value_or(std::vector<std::int64_t>{});
}

std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank) { return axis < 0 ? axis + rank : axis; }

}  // namespace

std::size_t Known::size() const { return is_float ? f.size() : i.size(); }

std::optional<std::vector<std::int64_t>> Known::plain_ints() const {
    if (is_float || symbolic_dims) return std::nullopt;
    std::vector<std::int64_t> out;
    for (const auto& d : i) {
        if (d.batch) return std::nullopt;
        out.push_back(d.value);
    }
    return out;
}

Result<Known> known_from_tensor(const onnx::TensorProto& tensor) {
    Known k;
    k.dims.assign(tensor.dims().begin(), tensor.dims().end());
    if (tensor.data_type() == onnx::TensorProto::FLOAT) {
        auto v = read_floats(tensor);
        if (!v) return tl::unexpected(v.error());
        k.is_float = true;
        k.f.assign(v->begin(), v->end());
        return k;
    }
    if (tensor.data_type() == onnx::TensorProto::DOUBLE) {
        const auto count = element_count(tensor);
        if (!count) return make_error(ErrorCode::kInvalidArgument, "tensor '" + tensor.name() + "': bad dims");
        k.is_float = true;
        if (tensor.has_raw_data()) {
            if (tensor.raw_data().size() != static_cast<std::size_t>(*count) * 8)
                return make_error(ErrorCode::kInvalidArgument, "tensor '" + tensor.name() + "': raw_data does not match its dims");
            k.f.resize(static_cast<std::size_t>(*count));
            std::memcpy(k.f.data(), tensor.raw_data().data(), k.f.size() * 8);
        } else {
            k.f.assign(tensor.double_data().begin(), tensor.double_data().end());
        }
        if (static_cast<std::int64_t>(k.f.size()) != *count)
            return make_error(ErrorCode::kInvalidArgument, "tensor '" + tensor.name() + "': data does not match its dims");
        return k;
    }
    auto v = read_ints(tensor);
    if (!v) return tl::unexpected(v.error());
    for (const auto x : *v) k.i.push_back(Dim{x, false});
    return k;
}

Result<std::optional<std::vector<Known>>> evaluate(const onnx::NodeProto& node, std::int64_t opset,
                                                    const std::vector<const Known*>& in, const nn::ValueInfo* shape_of) {
    const std::string& op = node.op_type();
    if (op == "Shape") {
        if (shape_of == nullptr) {
            if (in.empty() || in[0] == nullptr || in[0]->symbolic_dims) return Outputs{};
            std::vector<Dim> d;
            for (const auto x : in[0]->dims) d.push_back(Dim{x});
            return Outputs{{make_ints({static_cast<std::int64_t>(d.size())}, d)}};
        }
        return Outputs{{make_ints({static_cast<std::int64_t>(shape_of->dims.size())}, shape_of->dims)}};
    }
    for (std::size_t i = 0; i < in.size(); ++i)
        if (in[i] == nullptr && !(node.input(static_cast<int>(i)).empty())) return Outputs{};
    if (in.empty() || in[0] == nullptr) return Outputs{};
    const Known& a = *in[0];
    if (a.symbolic_dims && op != "Identity") return Outputs{};
    if (op == "Identity") return Outputs{{a}};
    if (op == "Cast") {
        auto to = int_attr(node, "to", 0);
        if (!to) return tl::unexpected(to.error());
        Known out = a;
        const bool to_float = *to == onnx::TensorProto::FLOAT || *to == onnx::TensorProto::DOUBLE ||
                              *to == onnx::TensorProto::FLOAT16;
        if (to_float && !a.is_float) {
            for (const auto& d : a.i)
                if (d.batch) return Outputs{};
            out = make_floats(a.dims, {});
            for (const auto& d : a.i) out.f.push_back(static_cast<double>(d.value));
        } else if (!to_float && a.is_float) {
            out = make_ints(a.dims, {});
            for (const auto x : a.f) out.i.push_back(Dim{*to == onnx::TensorProto::BOOL ? (x != 0) : static_cast<std::int64_t>(x)});
        }
        return Outputs{{out}};
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" || op == "Equal" || op == "Less" ||
        op == "Greater" || op == "Mod") {
        if (in.size() < 2 || in[1] == nullptr) return Outputs{};
        return binary(node, a, *in[1]);
    }
    if (op == "Neg" || op == "Sqrt" || op == "Reciprocal" || op == "Floor" || op == "Ceil" || op == "Not") {
        Known out = a;
        if (a.is_float) {
            for (auto& x : out.f)
                x = op == "Neg" ? -x : op == "Sqrt" ? std::sqrt(x) : op == "Reciprocal" ? 1.0 / x : op == "Floor" ? std::floor(x) : std::ceil(x);
        } else {
            for (auto& d : out.i) {
                if (op == "Neg") d.value = -d.value;
                else if (op == "Not" && !d.batch) d.value = d.value == 0;
                else if (d.batch || op != "Floor") return Outputs{};
            }
        }
        return Outputs{{out}};
    }
    if (op == "Where") {
        if (in.size() < 3 || in[1] == nullptr || in[2] == nullptr || in[1]->symbolic_dims || in[2]->symbolic_dims)
            return Outputs{};
        auto cond = a.plain_ints();
        if (!cond) return Outputs{};
        auto d1 = broadcast_dims(a.dims, in[1]->dims);
        if (!d1) return tl::unexpected(bad(node, "shapes do not broadcast"));
        auto dims = broadcast_dims(*d1, in[2]->dims);
        if (!dims) return tl::unexpected(bad(node, "shapes do not broadcast"));
        if (in[1]->is_float != in[2]->is_float) return Outputs{};
        Known out;
        out.dims = *dims;
        out.is_float = in[1]->is_float;
        const auto n = product(*dims);
        for (std::int64_t e = 0; e < n; ++e) {
            const Known& src = (*cond)[broadcast_index(e, *dims, a.dims)] != 0 ? *in[1] : *in[2];
            copy_element(src, broadcast_index(e, *dims, src.dims), out);
        }
        return Outputs{{out}};
    }
    if (op == "Unsqueeze" || op == "Squeeze") {
        auto axes = axes_of(node, opset, in, 1);
        if (!axes) return tl::unexpected(axes.error());
        Known out = a;
        if (op == "Unsqueeze") {
            const auto rank = static_cast<std::int64_t>(a.dims.size() + axes->size());
            std::vector<std::int64_t> sorted;
            for (auto x : *axes) sorted.push_back(normalize_axis(x, rank));
            std::sort(sorted.begin(), sorted.end());
            for (const auto x : sorted) {
                if (x < 0 || x > static_cast<std::int64_t>(out.dims.size())) return tl::unexpected(bad(node, "axis out of range"));
                out.dims.insert(out.dims.begin() + x, 1);
            }
        } else {
            const auto rank = static_cast<std::int64_t>(a.dims.size());
            std::vector<std::int64_t> keep;
            for (std::int64_t d = 0; d < rank; ++d) {
                bool drop = axes->empty() ? a.dims[static_cast<std::size_t>(d)] == 1 : false;
                for (auto x : *axes) drop = drop || normalize_axis(x, rank) == d;
                if (!drop) keep.push_back(a.dims[static_cast<std::size_t>(d)]);
            }
            out.dims = keep;
        }
        return Outputs{{out}};
    }
    if (op == "Concat") {
        auto axis = int_attr(node, "axis", 0);
        if (!axis) return tl::unexpected(axis.error());
        const auto rank = static_cast<std::int64_t>(a.dims.size());
        const std::int64_t ax = normalize_axis(*axis, rank);
        if (ax < 0 || ax >= rank) return tl::unexpected(bad(node, "axis out of range"));
        std::vector<std::int64_t> dims = a.dims;
        dims[static_cast<std::size_t>(ax)] = 0;
        for (const auto* k : in) {
            if (k == nullptr || k->symbolic_dims || k->is_float != a.is_float || k->dims.size() != a.dims.size()) return Outputs{};
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
        auto axis = int_attr(node, "axis", 0);
        if (!axis) return tl::unexpected(axis.error());
        const auto rank = static_cast<std::int64_t>(a.dims.size());
        const std::int64_t ax = normalize_axis(*axis, rank);
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
            const auto count = steps[k] > 0 ? std::max<std::int64_t>(0, (e - s + steps[k] - 1) / steps[k])
                                            : std::max<std::int64_t>(0, (s - e - steps[k] - 1) / -steps[k]);
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
            if (d < 0) return tl::unexpected(bad(node, "bad shape"));
            known *= d;
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
        auto perm = ints_attr(node, "perm");
        if (!perm) return tl::unexpected(perm.error());
        std::vector<std::int64_t> p(a.dims.size());
        std::iota(p.rbegin(), p.rend(), 0);
        if (*perm) p = **perm;
        if (p.size() != a.dims.size()) return tl::unexpected(bad(node, "perm does not match the rank"));
        std::vector<std::int64_t> dims;
        for (const auto x : p) dims.push_back(a.dims.at(static_cast<std::size_t>(x)));
        const auto as = strides_of(a.dims);
        const auto os = strides_of(dims);
        return Outputs{{gather_elements(a, dims, [&](std::int64_t e) {
            std::int64_t idx = 0;
            for (std::size_t d = 0; d < dims.size(); ++d) idx += ((e / os[d]) % dims[d]) * as[static_cast<std::size_t>(p[d])];
            return static_cast<std::size_t>(idx);
        })}};
    }
    if (op == "Expand") {
        if (in.size() < 2 || in[1] == nullptr) return Outputs{};
        auto shape = in[1]->plain_ints();
        if (!shape) return Outputs{};
        auto dims = broadcast_dims(a.dims, *shape);
        if (!dims) return tl::unexpected(bad(node, "the shape does not broadcast"));
        return Outputs{{gather_elements(a, *dims, [&](std::int64_t e) { return broadcast_index(e, *dims, a.dims); })}};
    }
    if (op == "ConstantOfShape") {
        double fill = 0.0;
        bool is_float = true;
        if (const auto* v = find_attribute(node, "value"); v != nullptr && v->has_t()) {
            auto k = known_from_tensor(v->t());
            if (!k) return tl::unexpected(k.error());
            if (k->size() != 1) return tl::unexpected(bad(node, "value must hold one element"));
            is_float = k->is_float;
            fill = as_double(*k, 0);
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
        if (product(dims) > (1 << 24)) return Outputs{};
        out.dims = dims;
        const auto n = static_cast<std::size_t>(product(dims));
        if (is_float) out.f.assign(n, fill);
        else out.i.assign(n, Dim{static_cast<std::int64_t>(fill)});
        return Outputs{{out}};
    }
    if (op == "Range") {
        if (in.size() < 3 || in[1] == nullptr || in[2] == nullptr) return Outputs{};
        if (a.symbolic_dims || in[1]->symbolic_dims || a.size() != 1 || in[1]->size() != 1 || in[2]->size() != 1) return Outputs{};
        const bool is_float = a.is_float;
        if (!is_float && (a.i[0].batch || in[1]->i[0].batch || in[2]->i[0].batch)) return Outputs{};
        const double start = as_double(a, 0), limit = as_double(*in[1], 0), delta = as_double(*in[2], 0);
        if (delta == 0) return tl::unexpected(bad(node, "delta is 0"));
        const auto n = std::max<std::int64_t>(0, static_cast<std::int64_t>(std::ceil((limit - start) / delta)));
        if (n > (1 << 24)) return Outputs{};
        Known out;
        out.is_float = is_float;
        out.dims = {n};
        for (std::int64_t k = 0; k < n; ++k) {
            const double v = start + static_cast<double>(k) * delta;
            if (is_float) out.f.push_back(v);
            else out.i.push_back(Dim{static_cast<std::int64_t>(v)});
        }
        return Outputs{{out}};
    }
    return Outputs{};
}

}  // namespace psrun::onnx_io
