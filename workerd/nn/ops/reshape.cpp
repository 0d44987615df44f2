// Layout-only kinds (the values keep their order in the plain row-major layout):
//   reshape: {"kind": "reshape", "shape": [d, ...]}: each d a positive integer, "N" or "kN"
//     (a multiple of the batch size), 0 (the input's dim at that place) or -1 (what is left;
//     at most one); canonical form: the resolved dims.
//   flatten: {"kind": "flatten", "axis": 1}: [d0 * ... * d(axis-1), d(axis) * ...] (ONNX's
//     Flatten; PyTorch's nn.Flatten is axis 1: N x C x H x W -> N x CHW in CHW order).
//   squeeze: {"kind": "squeeze", "axes": [a, ...]}: removes those dims (each 1);
//   unsqueeze: {"kind": "unsqueeze", "axes": [a, ...]}: inserts dims of 1 at those places of
//     the output. Axes may be negative (from the end); canonical form: non-negative, sorted.
// No tensors. ONNX: Reshape (constant or computed-at-import shape), Flatten, Squeeze,
// Unsqueeze.
#include <algorithm>
#include <set>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/fixed_batch.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

// A shape entry: an integer >= -1 or "N"/"kN".
std::optional<Dim> parse_entry(const nlohmann::json& v) {
    if (v.is_number_integer()) {
        const auto d = v.get<std::int64_t>();
        if (d < -1 || d > kMaxTensorElements) return std::nullopt;
        return Dim::of(d);
    }
    if (!v.is_string()) return std::nullopt;
    const std::string s = v.get<std::string>();
    if (s.empty() || s.back() != 'N' || s.size() > 9) return std::nullopt;
    std::int64_t k = s.size() == 1 ? 1 : 0;
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
        if (s[i] < '0' || s[i] > '9') return std::nullopt;
        k = k * 10 + (s[i] - '0');
    }
    if (k < 1) return std::nullopt;
    return Dim::batch_times(k);
}

Result<void> parse_reshape(FieldReader& reader, nlohmann::json& attrs) {
    if (!reader.has("shape")) return tl::unexpected(reader.fail("shape", "missing (a list of dims)"));
    const auto& shape = reader.raw("shape");
    if (!shape.is_array() || shape.empty() || shape.size() > 6)
        return tl::unexpected(reader.fail("shape", "expected 1 to 6 dims, got " + describe_value(shape)));
    int infer = 0;
    for (const auto& v : shape) {
        const auto d = parse_entry(v);
        if (!d)
            return tl::unexpected(
                reader.fail("shape", "expected integers >= -1, \"N\" or \"kN\", got " + describe_value(v)));
        infer += !d->batch && d->value == -1;
    }
    if (infer > 1) return tl::unexpected(reader.fail("shape", "at most one -1"));
    attrs["shape"] = shape;
    return {};
}

// Elements as N^power * value (power 0 or 1: one batch axis at most).
struct Count {
    int power = 0;
    std::int64_t value = 1;
};

std::optional<Count> count(const Dims& dims) {
    Count c;
    for (const auto& d : dims) {
        c.power += d.batch;
        const auto p = checked_product({c.value, d.value});
        if (!p) return std::nullopt;
        c.value = *p;
    }
    if (c.power > 1) return std::nullopt;
    return c;
}

Result<void> infer_reshape(InferContext& context) {
    const ValueInfo& in = context.input(0);
    const auto total = count(in.dims);
    if (!total) return tl::unexpected(op_error("the input " + to_string(in.dims) + " has more than one batch axis"));
    Dims out;
    int infer = -1;
    Count known;
    const auto& shape = context.attrs().at("shape");
    for (std::size_t i = 0; i < shape.size(); ++i) {
        Dim d = *parse_entry(shape[i]);
        if (!d.batch && d.value == 0) {
            if (i >= in.dims.size())
                return tl::unexpected(op_error("shape entry 0 at " + std::to_string(i) + " has no input dim to copy"));
            d = in.dims[i];
        }
        if (!d.batch && d.value == -1) {
            infer = static_cast<int>(i);
            out.push_back(Dim::of(1));
            continue;
        }
        if (d.value < 1) return tl::unexpected(op_error("a dim must be positive"));
        if (d.value > kMaxTensorElements || known.value > kMaxTensorElements / d.value)
            return tl::unexpected(op_error("the shape " + describe_value(shape) + " holds more than " +
                                           std::to_string(kMaxTensorElements) + " values per example"));
        known.power += d.batch;
        known.value *= d.value;
        out.push_back(d);
    }
    if (infer >= 0) {
        if (known.power > total->power || known.value == 0 || total->value % known.value != 0)
            return tl::unexpected(op_error("cannot reshape " + to_string(in.dims) + " into " + describe_value(shape)));
        out[static_cast<std::size_t>(infer)] = Dim{total->value / known.value, total->power > known.power};
        known = *total;
    }
    if (known.power != total->power || known.value != total->value)
        return tl::unexpected(op_error("cannot reshape " + to_string(in.dims) + " (" + std::to_string(total->value) +
                                       (total->power ? "N" : "") + " values) into " + to_string(out)));
    context.set_output(0, ValueInfo{out, in.type});
    return {};
}

Result<void> parse_flatten(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto axis, reader.integer("axis", 1, -6, 6));
    attrs["axis"] = axis;
    return {};
}

Result<void> infer_flatten(InferContext& context) {
    const ValueInfo& in = context.input(0);
    const auto rank = static_cast<std::int64_t>(in.rank());
    std::int64_t axis = context.attr_int("axis");
    if (axis < 0) axis += rank;
    if (axis < 0 || axis > rank)
        return tl::unexpected(
            op_error("axis " + std::to_string(context.attr_int("axis")) + " for rank " + std::to_string(rank)));
    const auto head = count(Dims(in.dims.begin(), in.dims.begin() + axis));
    const auto tail = count(Dims(in.dims.begin() + axis, in.dims.end()));
    if (!head || !tail) return tl::unexpected(op_error("too large, or more than one batch axis"));
    context.set_output(0, ValueInfo{{Dim{head->value, head->power == 1}, Dim{tail->value, tail->power == 1}}, in.type});
    return {};
}

Result<void> parse_axes(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto axes, reader.integers("axes", std::nullopt, 0, -6, 6));
    attrs["axes"] = axes;
    return {};
}

// Normalised, sorted, distinct axes for a rank, or an error.
Result<std::vector<std::int64_t>> normal_axes(const InferContext& context, std::int64_t rank) {
    std::set<std::int64_t> out;
    for (auto a : context.attr_ints("axes")) {
        const auto n = a < 0 ? a + rank : a;
        if (n < 0 || n >= rank || !out.insert(n).second)
            return tl::unexpected(op_error("axis " + std::to_string(a) + " is out of range or repeated for rank " +
                                           std::to_string(rank)));
    }
    return std::vector<std::int64_t>(out.begin(), out.end());
}

Result<void> infer_squeeze(InferContext& context) {
    const ValueInfo& in = context.input(0);
    PSRUN_TRY_ASSIGN(auto axes, normal_axes(context, static_cast<std::int64_t>(in.rank())));
    Dims out;
    for (std::size_t i = 0; i < in.dims.size(); ++i) {
        const bool drop = std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(i)) != axes.end();
        if (drop && in.dims[i] != Dim::of(1))
            return tl::unexpected(op_error("dim " + std::to_string(i) + " of " + to_string(in.dims) + " is not 1"));
        if (!drop) out.push_back(in.dims[i]);
    }
    context.set_output(0, ValueInfo{out, in.type});
    return {};
}

Result<void> infer_unsqueeze(InferContext& context) {
    const ValueInfo& in = context.input(0);
    const auto rank = static_cast<std::int64_t>(in.rank() + context.attr_ints("axes").size());
    if (rank > 6) return tl::unexpected(op_error("the output would have more than 6 dims"));
    PSRUN_TRY_ASSIGN(auto axes, normal_axes(context, rank));
    Dims out;
    std::size_t next = 0;
    for (std::int64_t i = 0; i < rank; ++i) {
        if (std::find(axes.begin(), axes.end(), i) != axes.end()) out.push_back(Dim::of(1));
        else out.push_back(in.dims[next++]);
    }
    context.set_output(0, ValueInfo{out, in.type});
    return {};
}

Result<void> import_layout(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const auto op = node.op_type();
    nlohmann::json layer = {{"inputs", {x}}};
    if (op == "Reshape") {
        const auto shape = node.symbolic_ints(1);
        if (!shape)
            return tl::unexpected(node.refuse("its shape is computed at run time: the engine needs it at import"));
        PSRUN_TRY_ASSIGN(auto allowzero,
                         node.int_attr("allowzero", 0));  // opset 14: a 0 is a zero-sized dim, not "copy"
        if (allowzero != 0)
            for (const auto& d : *shape)
                if (!d.batch && d.value == 0)
                    return tl::unexpected(
                        node.refuse("allowzero=1 with a 0 in the shape: zero-sized tensors are not supported"));
        // A file of fixed batch size writes the shapes computed from its batch as constants.
        auto dims = *shape;
        if (const ValueInfo* in = node.info(0); node.file_batch() == 1 && in != nullptr) {
            // At 1 the target does not say which axis held the batch: the importer chooses.
            const auto readings = reshape_readings_at_batch_one(in->dims, dims);
            if (!readings.empty()) dims = readings[std::min(node.choose_reading(readings.size()), readings.size() - 1)];
        } else if (node.file_batch() > 1 && in != nullptr) {
            if (auto at_batch = reshape_target_at_fixed_batch(in->dims, dims, node.file_batch())) dims = *at_batch;
        }
        nlohmann::json target = nlohmann::json::array();
        for (const auto& d : dims) target.push_back(d.batch ? nlohmann::json(d.to_string()) : nlohmann::json(d.value));
        layer["kind"] = "reshape";
        layer["shape"] = target;
    } else if (op == "Flatten") {
        PSRUN_TRY_ASSIGN(auto axis, node.int_attr("axis", 1));
        layer["kind"] = "flatten";
        layer["axis"] = axis;
    } else {
        std::vector<std::int64_t> axes;
        if (node.opset() >= 13) {
            if (node.has_input(1)) {
                auto a = node.ints(1);
                if (!a) return tl::unexpected(node.refuse("its axes must be constant"));
                axes = *a;
            }
        } else {
            PSRUN_TRY_ASSIGN(auto a, node.ints_attr("axes"));
            if (a) axes = *a;
        }
        if (axes.empty()) {
            const ValueInfo* in = node.info(0);
            if (op != "Squeeze" || in == nullptr) return tl::unexpected(node.refuse("axes are required"));
            for (std::size_t i = 0; i < in->dims.size(); ++i)
                if (in->dims[i] == Dim::of(1)) axes.push_back(static_cast<std::int64_t>(i));
        }
        layer["kind"] = op == "Squeeze" ? "squeeze" : "unsqueeze";
        layer["axes"] = axes;
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit(layer));
    node.bind_output(0, name);
    return {};
}

Result<void> export_layout(OnnxNodeExport& out) {
    const Node& node = out.node();
    if (node.op == "flatten") {
        out.add("Flatten", {out.input(0)}, {out.output(0)}, {{"axis", node.attrs.at("axis").get<std::int64_t>()}},
                node.name);
        return {};
    }
    // The output dims with the batch axis as -1 (ONNX computes it from the element count).
    std::vector<std::int64_t> shape;
    int batch = 0;
    for (const auto& d : node.output_info.front().dims) {
        shape.push_back(d.batch ? -1 : d.value);
        batch += d.batch;
    }
    if (batch > 1) return tl::unexpected(op_error("an output with two batch axes has no ONNX Reshape form"));
    out.add("Reshape", {out.input(0), out.int64_constant(node.name + "/shape", shape)}, {out.output(0)}, {}, node.name);
    return {};
}

}  // namespace

const OpSchema& reshape_schema() {
    static const OpSchema s{"reshape", 1, 1, parse_reshape, infer_reshape, {"Reshape"}, import_layout, export_layout};
    return s;
}
const OpSchema& flatten_schema() {
    static const OpSchema s{"flatten", 1, 1, parse_flatten, infer_flatten, {"Flatten"}, import_layout, export_layout};
    return s;
}
const OpSchema& squeeze_schema() {
    static const OpSchema s{"squeeze", 1, 1, parse_axes, infer_squeeze, {"Squeeze"}, import_layout, export_layout};
    return s;
}
const OpSchema& unsqueeze_schema() {
    static const OpSchema s{"unsqueeze",  1, 1, parse_axes, infer_unsqueeze, {"Unsqueeze"}, import_layout,
                            export_layout};
    return s;
}

}  // namespace psrun::nn
