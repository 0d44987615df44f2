#include "workerd/onnx/onnx_consts.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "workerd/onnx/onnx_consts_ops.h"

namespace psrun::onnx_io {

namespace consts_detail {

Error bad(const onnx::NodeProto& node, const std::string& what) {
    return Error{ErrorCode::kInvalidArgument, "node '" + node.name() + "' (" + node.op_type() + "): " + what};
}

std::int64_t product(const std::vector<std::int64_t>& dims) {
    if (std::find(dims.begin(), dims.end(), 0) != dims.end()) return 0;
    std::int64_t p = 1;
    for (const auto d : dims)
        if (__builtin_mul_overflow(p, d, &p)) return std::numeric_limits<std::int64_t>::max();
    return p;
}

std::int64_t wrap_add(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
std::int64_t wrap_sub(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}
std::int64_t wrap_mul(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
}

std::int64_t saturate_int(double x) {
    if (std::isnan(x)) return 0;
    if (x >= 9.2233720368547758e18) return std::numeric_limits<std::int64_t>::max();
    if (x <= -9.2233720368547758e18) return std::numeric_limits<std::int64_t>::min();
    return static_cast<std::int64_t>(x);
}

std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& dims) {
    std::vector<std::int64_t> s(dims.size(), 1);
    for (std::size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
    return s;
}

// Element `flat` of a tensor of `dims` read through broadcasting from a tensor of `from`.
std::size_t broadcast_index(std::int64_t flat, const std::vector<std::int64_t>& dims,
                            const std::vector<std::int64_t>& from) {
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

std::optional<std::vector<std::int64_t>> broadcast_dims(const std::vector<std::int64_t>& a,
                                                        const std::vector<std::int64_t>& b) {
    std::vector<std::int64_t> out(std::max(a.size(), b.size()), 1);
    for (std::size_t i = 0; i < out.size(); ++i) {
        const std::int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
        const std::int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
        if (x != y && x != 1 && y != 1) return std::nullopt;
        out[i] = x == 1 ? y : x;  // 1 against 0 is 0: an empty operand makes an empty result
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

// A Known's element e (float or int) copied into `to` at position t.
void copy_element(const Known& from, std::size_t e, Known& to) {
    if (from.is_float) to.f.push_back(from.f[e]);
    else to.i.push_back(from.i[e]);
}

Known gather_elements(const Known& data, const std::vector<std::int64_t>& dims,
                      const std::function<std::size_t(std::int64_t)>& source) {
    Known out;
    out.dims = dims;
    out.is_float = data.is_float;
    const auto n = product(dims);
    for (std::int64_t e = 0; e < n; ++e) copy_element(data, source(e), out);
    return out;
}

Result<std::vector<std::int64_t>> axes_of(const onnx::NodeProto& node, std::int64_t opset,
                                          const std::vector<const Known*>& in, std::size_t input) {
    if (opset >= 13 && in.size() > input && in[input] != nullptr) {
        auto v = in[input]->plain_ints();
        if (!v) return tl::unexpected(bad(node, "axes depend on the batch size"));
        return *v;
    }
    PSRUN_TRY_ASSIGN(auto a, ints_attr(node, "axes"));
    return a.value_or(std::vector<std::int64_t>{});
}

std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank) { return axis < 0 ? axis + rank : axis; }

}  // namespace consts_detail

using namespace consts_detail;

namespace {

// Integer arithmetic where N may appear linearly; nullopt where N's value would be needed.
// `c_mod`: Mod's fmod=1 (the dividend's sign, C's %); else the divisor's (Python's %).
std::optional<Dim> int_op(const std::string& op, Dim a, Dim b, bool c_mod) {
    if (op == "Mul") {
        if (a.batch && b.batch) return std::nullopt;
        return Dim{wrap_mul(a.value, b.value), a.batch || b.batch};
    }
    if (op == "Div") {
        if (b.batch || b.value == 0) return std::nullopt;
        if (a.batch && a.value % b.value != 0) return std::nullopt;
        // ONNX integer Div truncates toward zero (as C++); INT64_MIN / -1 wraps.
        return Dim{b.value == -1 ? wrap_sub(0, a.value) : a.value / b.value, a.batch};
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
    if (op == "Add") return Dim{wrap_add(a.value, b.value)};
    if (op == "Sub") return Dim{wrap_sub(a.value, b.value)};
    if (op == "Equal") return Dim{a.value == b.value ? 1 : 0};
    if (op == "Less") return Dim{a.value < b.value ? 1 : 0};
    if (op == "Greater") return Dim{a.value > b.value ? 1 : 0};
    if (op == "Mod" && b.value != 0) {
        std::int64_t r = b.value == -1 ? 0 : a.value % b.value;
        if (!c_mod && r != 0 && (r < 0) != (b.value < 0)) r += b.value;
        return Dim{r};
    }
    if (op == "And") return Dim{a.value != 0 && b.value != 0 ? 1 : 0};
    if (op == "Or") return Dim{a.value != 0 || b.value != 0 ? 1 : 0};
    if (op == "Xor") return Dim{(a.value != 0) != (b.value != 0) ? 1 : 0};
    if (op == "Max") return Dim{std::max(a.value, b.value)};
    if (op == "Min") return Dim{std::min(a.value, b.value)};
    return std::nullopt;
}

Result<Outputs> binary(const onnx::NodeProto& node, const Known& a, const Known& b) {
    const std::string& op = node.op_type();
    if (a.symbolic_dims || b.symbolic_dims) return Outputs{};
    const auto dims = broadcast_dims(a.dims, b.dims);
    if (!dims) return tl::unexpected(bad(node, "shapes do not broadcast"));
    const auto n = product(*dims);
    if (n > kMaxKnownElements) return Outputs{};
    const bool compare = op == "Equal" || op == "Less" || op == "Greater";
    PSRUN_TRY_ASSIGN(auto fmod, op == "Mod" ? int_attr(node, "fmod", 0) : Result<std::int64_t>(0));
    const bool c_mod = fmod != 0;
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
            if (op == "And" || op == "Or" || op == "Xor") return Outputs{};  // of booleans only
            f.push_back(op == "Add"   ? x + y
                        : op == "Sub" ? x - y
                        : op == "Mul" ? x * y
                        : op == "Div" ? x / y
                        : op == "Max" ? std::max(x, y)
                        : op == "Min" ? std::min(x, y)
                        : op == "Mod" ? (c_mod ? std::fmod(x, y) : x - y * std::floor(x / y))
                                      : std::pow(x, y));
        }
        if (compare) return Outputs{{make_ints(*dims, c)}};
        return Outputs{{make_floats(*dims, f)}};
    }
    std::vector<Dim> out;
    for (std::int64_t e = 0; e < n; ++e) {
        const auto r =
            int_op(op, a.i[broadcast_index(e, *dims, a.dims)], b.i[broadcast_index(e, *dims, b.dims)], c_mod);
        if (!r) return Outputs{};
        out.push_back(*r);
    }
    return Outputs{{make_ints(*dims, out)}};
}

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
    k.onnx_type = tensor.data_type();
    if (tensor.data_type() == onnx::TensorProto::FLOAT) {
        PSRUN_TRY_ASSIGN(auto v, read_floats(tensor));
        k.is_float = true;
        k.f.assign(v.begin(), v.end());
        return k;
    }
    if (tensor.data_type() == onnx::TensorProto::DOUBLE) {
        const auto count = element_count(tensor);
        if (!count) return make_error(ErrorCode::kInvalidArgument, "tensor '" + tensor.name() + "': bad dims");
        k.is_float = true;
        if (tensor.has_raw_data()) {
            if (tensor.raw_data().size() != static_cast<std::size_t>(*count) * 8)
                return make_error(ErrorCode::kInvalidArgument,
                                  "tensor '" + tensor.name() + "': raw_data does not match its dims");
            k.f.resize(static_cast<std::size_t>(*count));
            std::memcpy(k.f.data(), tensor.raw_data().data(), k.f.size() * 8);
        } else {
            k.f.assign(tensor.double_data().begin(), tensor.double_data().end());
        }
        if (static_cast<std::int64_t>(k.f.size()) != *count)
            return make_error(ErrorCode::kInvalidArgument,
                              "tensor '" + tensor.name() + "': data does not match its dims");
        return k;
    }
    PSRUN_TRY_ASSIGN(auto v, read_ints(tensor));
    for (const auto x : v) k.i.push_back(Dim{x, false});
    return k;
}

Result<std::optional<std::vector<Known>>> evaluate(const onnx::NodeProto& node, std::int64_t opset,
                                                   const std::vector<const Known*>& in, const nn::ValueInfo* shape_of) {
    const std::string& op = node.op_type();
    if (op == "Shape") {
        std::vector<Dim> d;
        if (shape_of == nullptr) {
            if (in.empty() || in[0] == nullptr) return Outputs{};
            if (in[0]->symbolic_dims) {  // a batch-sized fill (torch.zeros_like(x.new_zeros(N, ...)))
                d = *in[0]->symbolic_dims;
            } else {
                for (const auto x : in[0]->dims) d.push_back(Dim{x});
            }
        } else {
            d = shape_of->dims;
        }
        // Opset 15: the dims from `start` to `end` (negative: from the back; clamped).
        const auto rank = static_cast<std::int64_t>(d.size());
        auto start = int_attr(node, "start", 0);
        auto end = int_attr(node, "end", rank);
        if (!start || !end) return tl::unexpected(!start ? start.error() : end.error());
        auto clamp = [rank](std::int64_t v) { return std::clamp(v < 0 ? v + rank : v, std::int64_t{0}, rank); };
        const std::int64_t first = clamp(*start), last = std::max(first, clamp(*end));
        d = std::vector<Dim>(d.begin() + first, d.begin() + last);
        return Outputs{{make_ints({static_cast<std::int64_t>(d.size())}, d)}};
    }
    for (std::size_t i = 0; i < in.size(); ++i)
        if (in[i] == nullptr && !(node.input(static_cast<int>(i)).empty())) return Outputs{};
    if (in.empty() || in[0] == nullptr) return Outputs{};
    const Known& a = *in[0];
    if (a.symbolic_dims && op != "Identity") return Outputs{};
    if (op == "Identity") return Outputs{{a}};
    if (op == "Cast") {
        PSRUN_TRY_ASSIGN(auto to, int_attr(node, "to", 0));
        Known out = a;
        const bool to_float =
            to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE || to == onnx::TensorProto::FLOAT16;
        if (to_float && !a.is_float) {
            for (const auto& d : a.i)
                if (d.batch) return Outputs{};
            out = make_floats(a.dims, {});
            for (const auto& d : a.i) out.f.push_back(static_cast<double>(d.value));
        } else if (!to_float && a.is_float) {
            out = make_ints(a.dims, {});
            for (const auto x : a.f) out.i.push_back(Dim{to == onnx::TensorProto::BOOL ? (x != 0) : saturate_int(x)});
        } else if (to == onnx::TensorProto::BOOL) {  // integers to bool: 0 or 1 (N >= 1 is true)
            for (auto& d : out.i) d = Dim{d.batch || d.value != 0};
        }
        out.onnx_type = static_cast<int>(to);  // a quantizer's zero point: Cast(to=uint8) of an int64
        return Outputs{{out}};
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" || op == "Equal" || op == "Less" ||
        op == "Greater" || op == "Mod" || op == "And" || op == "Or" || op == "Xor" ||
        ((op == "Max" || op == "Min") && in.size() == 2)) {
        if (in.size() < 2 || in[1] == nullptr) return Outputs{};
        return binary(node, a, *in[1]);
    }
    if (op == "Neg" || op == "Sqrt" || op == "Reciprocal" || op == "Floor" || op == "Ceil" || op == "Not" ||
        op == "Abs" || op == "Log" || op == "Exp") {
        Known out = a;
        if (a.is_float) {
            for (auto& x : out.f)
                x = op == "Not"          ? (x == 0 ? 1.0 : 0.0)
                    : op == "Neg"        ? -x
                    : op == "Sqrt"       ? std::sqrt(x)
                    : op == "Reciprocal" ? 1.0 / x
                    : op == "Floor"      ? std::floor(x)
                    : op == "Abs"        ? std::fabs(x)
                    : op == "Log"        ? std::log(x)
                    : op == "Exp"        ? std::exp(x)
                                         : std::ceil(x);
        } else {
            for (auto& d : out.i) {
                if (op == "Neg") d.value = wrap_sub(0, d.value);
                else if (op == "Not" && !d.batch) d.value = d.value == 0;
                else if (op == "Abs" && !d.batch)
                    d.value = d.value == std::numeric_limits<std::int64_t>::min() ? d.value : std::abs(d.value);
                else if (d.batch || (op != "Floor" && op != "Ceil")) return Outputs{};
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
        if (n > kMaxKnownElements) return Outputs{};
        for (std::int64_t e = 0; e < n; ++e) {
            const Known& src = (*cond)[broadcast_index(e, *dims, a.dims)] != 0 ? *in[1] : *in[2];
            copy_element(src, broadcast_index(e, *dims, src.dims), out);
        }
        return Outputs{{out}};
    }
    if (op.rfind("Reduce", 0) == 0) return evaluate_reduce(node, opset, in);
    if (op == "Split" || op == "Trilu" || op == "EyeLike" || op == "ScatterND") return evaluate_select(node, opset, in);
    return evaluate_layout(node, opset, in);
}

}  // namespace psrun::onnx_io
