// Sampling an image at the points a grid gives (F.grid_sample, 2-D):
//   {"kind": "grid_sample", "inputs": [x, grid], "mode": "bilinear" | "nearest",
//    "padding_mode": "zeros" | "border" | "reflection", "align_corners": false}
// x is N x C x H x W, grid N x OH x OW x 2: grid[n, i, j] = (gx, gy) in [-1, 1] picks the point
// of x[n] that output[n, :, i, j] is sampled at (gx along W, gy along H; -1 and 1 the corners'
// centres with align_corners, their outer edges without). Points outside the image read zeros,
// the nearest border pixel, or the image reflected at its border. Output N x C x OH x OW, as
// torch.nn.functional.grid_sample computes it, and its gradients: to x (bilinear weights or the
// nearest pixel) and, bilinear, to the grid (nearest: zero, as torch's). No tensors. FLOPs:
// about 8 per output element.
// ONNX: GridSample (opset 16 on; opset 20's "linear" is bilinear); bicubic and 5-D grids are
// refused naming the node. Export: GridSample, which raises the file's opset to 16.
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_grid_sample(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto mode, reader.choice("mode", 0, {"bilinear", "nearest"}));
    PSRUN_TRY_ASSIGN(auto padding, reader.choice("padding_mode", 0, {"zeros", "border", "reflection"}));
    PSRUN_TRY_ASSIGN(auto align, reader.boolean("align_corners", false));
    attrs["mode"] = mode == 0 ? "bilinear" : "nearest";
    attrs["padding_mode"] = padding == 0 ? "zeros" : padding == 1 ? "border" : "reflection";
    attrs["align_corners"] = align;
    return {};
}

Result<void> infer_grid_sample(InferContext& context) {
    const ValueInfo& x = context.input(0);
    const ValueInfo& grid = context.input(1);
    if (x.type != ElementType::kFloat || grid.type != ElementType::kFloat)
        return tl::unexpected(op_error("samples floats at float coordinates, got integers"));
    if (x.rank() != 4)
        return tl::unexpected(op_error("the input must be N x C x H x W (2-D sampling), got " + to_string(x.dims)));
    if (grid.rank() != 4 || grid.dims[3] != Dim::of(2))
        return tl::unexpected(
            op_error("the grid must be N x OH x OW x 2 (x, y per output point), got " + to_string(grid.dims)));
    if (grid.dims[0] != x.dims[0])
        return tl::unexpected(op_error("the grid's first dim " + grid.dims[0].to_string() + " is not the input's " +
                                       x.dims[0].to_string() + ": give one grid per example"));
    for (std::size_t d = 1; d < 4; ++d)
        if (x.dims[d].batch || grid.dims[d].batch)
            return tl::unexpected(op_error("only the first dim may be the batch's"));
    const Dims out{x.dims[0], x.dims[1], grid.dims[1], grid.dims[2]};
    context.set_output(0, ValueInfo{out, ElementType::kFloat});
    context.add_flops(8.0 * static_cast<double>(elements_per_example(out).value_or(0)));
    return {};
}

Result<void> import_grid_sample(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    PSRUN_TRY_ASSIGN(auto grid, node.value(1));
    PSRUN_TRY_ASSIGN(auto mode, node.string_attr("mode", "bilinear"));
    if (mode == "linear") mode = "bilinear";  // opset 20's name
    if (mode != "bilinear" && mode != "nearest")
        return tl::unexpected(node.refuse("mode " + mode + ": psrun samples bilinear or nearest"));
    PSRUN_TRY_ASSIGN(auto padding, node.string_attr("padding_mode", "zeros"));
    if (padding != "zeros" && padding != "border" && padding != "reflection")
        return tl::unexpected(node.refuse("padding_mode " + padding + " is not zeros, border or reflection"));
    PSRUN_TRY_ASSIGN(auto align, node.int_attr("align_corners", 0));
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "grid_sample"},
                                           {"inputs", {x, grid}},
                                           {"mode", mode},
                                           {"padding_mode", padding},
                                           {"align_corners", align != 0}}));
    node.bind_output(0, name);
    return {};
}

Result<void> export_grid_sample(OnnxNodeExport& out) {
    const Node& node = out.node();
    out.require_opset(16);
    out.add("GridSample", {out.input(0), out.input(1)}, {out.output(0)},
            {{"mode", node.attrs.at("mode").get<std::string>()},
             {"padding_mode", node.attrs.at("padding_mode").get<std::string>()},
             {"align_corners", std::int64_t{node.attrs.at("align_corners").get<bool>() ? 1 : 0}}},
            node.name);
    return {};
}

}  // namespace

const OpSchema& grid_sample_schema() {
    static const OpSchema s{
        "grid_sample",     2, 2, parse_grid_sample, infer_grid_sample, {"GridSample"}, import_grid_sample,
        export_grid_sample};
    return s;
}

}  // namespace psrun::nn
