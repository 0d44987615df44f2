// Split, Trilu and EyeLike of known tensors (onnx_consts.h): x.repeat_interleave(r, dim) splits
// its known repeat counts; torch.tril/torch.triu of torch.ones(L, L) or torch.full(.., -inf) is a
// causal mask built in forward(); torch.diagonal multiplies by an EyeLike of a known [R, C];
// ScatterND of known tensors is slice assignment on a buffer made in forward() (Swin's
// shifted-window mask: img_mask[h, w] = count).
#include "workerd/onnx/onnx_consts_ops.h"

namespace psrun::onnx_io::consts_detail {

namespace {

// The part sizes of a Split of `extent` into `parts` (ONNX: the `split` input from opset 13, the
// attribute before; none: equal parts, the last smaller at opset 18's num_outputs).
Result<std::vector<std::int64_t>> split_sizes(const onnx::NodeProto& node, std::int64_t opset,
                                              const std::vector<const Known*>& in, std::int64_t extent) {
    std::vector<std::int64_t> sizes;
    if (opset >= 13 && in.size() > 1 && in[1] != nullptr) {
        auto given = in[1]->plain_ints();
        if (!given || in[1]->is_float) return tl::unexpected(bad(node, "its split sizes must be integers"));
        sizes = *given;
    } else if (opset < 13) {
        PSRUN_TRY_ASSIGN(auto given, ints_attr(node, "split"));
        if (given) sizes = *given;
    }
    const auto parts = static_cast<std::int64_t>(node.output_size());
    if (sizes.empty()) {
        if (parts < 1) return tl::unexpected(bad(node, "no outputs"));
        const std::int64_t each = (extent + parts - 1) / parts;
        for (std::int64_t p = 0; p < parts; ++p)
            sizes.push_back(std::max<std::int64_t>(0, std::min(each, extent - p * each)));
    }
    if (static_cast<std::int64_t>(sizes.size()) != parts)
        return tl::unexpected(
            bad(node, std::to_string(sizes.size()) + " split sizes for " + std::to_string(parts) + " outputs"));
    std::int64_t total = 0;  // capped at extent + 1 ("more than the axis"): sizes from a file cannot overflow it
    for (const auto s : sizes) {
        if (s < 0) return tl::unexpected(bad(node, "a negative split size"));
        total = std::min(total + std::min(s, extent + 1), extent + 1);
    }
    if (total != extent)
        return tl::unexpected(bad(node, "the split sizes do not add up to the axis' " + std::to_string(extent)));
    return sizes;
}

// data with each index tuple's slice replaced by (reduction add: increased by) its update.
Result<Outputs> scatter_nd(const onnx::NodeProto& node, const std::vector<const Known*>& in) {
    if (in.size() != 3 || in[1] == nullptr || in[2] == nullptr) return Outputs{};
    const Known& data = *in[0];
    const auto tuples = in[1]->plain_ints();
    if (!tuples || in[1]->is_float || in[1]->dims.empty() || data.is_float != in[2]->is_float) return Outputs{};
    if (!data.is_float && (!data.plain_ints() || !in[2]->plain_ints())) return Outputs{};  // N-dependent
    PSRUN_TRY_ASSIGN(auto reduction, string_attr(node, "reduction", "none"));
    if (reduction != "none" && reduction != "add") return Outputs{};
    const auto k = in[1]->dims.back();
    const auto rank = static_cast<std::int64_t>(data.dims.size());
    if (k < 1 || k > rank) return tl::unexpected(bad(node, "index tuples longer than the data's rank"));
    const auto strides = strides_of(data.dims);
    const std::int64_t slice = k == rank ? 1 : strides[static_cast<std::size_t>(k - 1)];
    const auto count = static_cast<std::int64_t>(tuples->size()) / k;
    if (static_cast<std::int64_t>(in[2]->size()) != count * slice)
        return tl::unexpected(bad(node, "its updates do not match its indices and data"));
    Known out = data;
    for (std::int64_t t = 0; t < count; ++t) {
        std::int64_t at = 0;
        for (std::int64_t d = 0; d < k; ++d) {
            std::int64_t i = (*tuples)[static_cast<std::size_t>(t * k + d)];
            const auto extent = data.dims[static_cast<std::size_t>(d)];
            if (i < 0) i += extent;
            if (i < 0 || i >= extent) return tl::unexpected(bad(node, "an index outside the data"));
            at += i * strides[static_cast<std::size_t>(d)];
        }
        for (std::int64_t e = 0; e < slice; ++e) {
            const auto to = static_cast<std::size_t>(at + e), from = static_cast<std::size_t>(t * slice + e);
            if (out.is_float) out.f[to] = (reduction == "add" ? out.f[to] : 0.0) + in[2]->f[from];
            else out.i[to] = Dim{(reduction == "add" ? out.i[to].value : 0) + in[2]->i[from].value};
        }
    }
    return Outputs{{std::move(out)}};
}

}  // namespace

Result<Outputs> evaluate_select(const onnx::NodeProto& node, std::int64_t opset, const std::vector<const Known*>& in) {
    const Known& a = *in[0];
    const auto rank = static_cast<std::int64_t>(a.dims.size());
    if (node.op_type() == "Split") {
        PSRUN_TRY_ASSIGN(auto given, int_attr(node, "axis", 0));
        const std::int64_t axis = normalize_axis(given, rank);
        if (axis < 0 || axis >= rank) return tl::unexpected(bad(node, "axis out of range"));
        const auto extent = a.dims[static_cast<std::size_t>(axis)];
        PSRUN_TRY_ASSIGN(auto sizes, split_sizes(node, opset, in, extent));
        const auto strides = strides_of(a.dims);
        const auto stride = strides[static_cast<std::size_t>(axis)];
        std::vector<Known> parts;
        std::int64_t start = 0;
        for (const auto size : sizes) {
            auto dims = a.dims;
            dims[static_cast<std::size_t>(axis)] = size;
            const auto part_strides = strides_of(dims);
            const auto part_stride = part_strides[static_cast<std::size_t>(axis)];
            // Element e of the part: its index along the axis shifted by `start`.
            parts.push_back(gather_elements(a, dims, [&](std::int64_t e) {
                const std::int64_t outer = e / (part_stride * size), along = (e / part_stride) % size,
                                   inner = e % part_stride;
                return static_cast<std::size_t>(outer * stride * extent + (start + along) * stride + inner);
            }));
            start += size;
        }
        return parts;
    }
    if (node.op_type() == "ScatterND") return scatter_nd(node, in);
    if (node.op_type() == "EyeLike") {  // ones where column - row == k, of dtype (default: the input's)
        if (rank != 2) return tl::unexpected(bad(node, "its input must be 2-D"));
        PSRUN_TRY_ASSIGN(auto k, int_attr(node, "k", 0));
        PSRUN_TRY_ASSIGN(auto dtype,
                         int_attr(node, "dtype", a.is_float ? onnx::TensorProto::FLOAT : onnx::TensorProto::INT64));
        Known out;
        out.dims = a.dims;
        out.is_float = dtype == onnx::TensorProto::FLOAT || dtype == onnx::TensorProto::DOUBLE ||
                       dtype == onnx::TensorProto::FLOAT16 || dtype == onnx::TensorProto::BFLOAT16;
        const std::int64_t cols = a.dims[1];
        for (std::int64_t e = 0; e < static_cast<std::int64_t>(a.size()); ++e) {
            const bool one = e % cols - e / cols == k;
            if (out.is_float) out.f.push_back(one ? 1.0 : 0.0);
            else out.i.push_back(nn::Dim{one ? 1 : 0});
        }
        return Outputs{{std::move(out)}};
    }
    // Trilu: keep column - row >= k (upper) or <= k (lower) of the last two axes, zero the rest.
    if (rank < 2) return tl::unexpected(bad(node, "its input must have 2 or more axes"));
    std::int64_t k = 0;
    if (in.size() > 1 && in[1] != nullptr) {
        auto given = in[1]->plain_ints();
        if (!given || given->size() != 1) return tl::unexpected(bad(node, "k must be one integer"));
        k = given->front();
    }
    PSRUN_TRY_ASSIGN(auto upper, int_attr(node, "upper", 1));
    const auto rows = a.dims[static_cast<std::size_t>(rank - 2)], cols = a.dims[static_cast<std::size_t>(rank - 1)];
    Known out = a;
    for (std::int64_t e = 0; e < static_cast<std::int64_t>(a.size()); ++e) {
        const std::int64_t col = e % cols, row = (e / cols) % rows;
        const bool keep = upper != 0 ? col - row >= k : col - row <= k;
        if (keep) continue;
        if (out.is_float) out.f[static_cast<std::size_t>(e)] = 0.0;
        else out.i[static_cast<std::size_t>(e)] = nn::Dim{0};
    }
    return Outputs{{std::move(out)}};
}

}  // namespace psrun::onnx_io::consts_detail
