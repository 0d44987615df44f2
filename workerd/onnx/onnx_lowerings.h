// ONNX operators that have no kind of their own and import as a few layers of existing kinds
// (onnx_lowerings.cpp, onnx_lowerings_reduce.cpp): DepthToSpace, SpaceToDepth, Tile, Celu,
// OneHot, Trilu, GreaterOrEqual, LessOrEqual, GatherElements, ScatterElements, ReduceL1, ReduceL2, ReduceSumSquare,
// ReduceLogSumExp, Sum, Mean; and ArgMax,
// ArgMin, TopK, whose refusals say why. The importer tries them after the fused patterns and before the kinds.
#pragma once

#include <string_view>
#include <vector>

#include "common/result.h"
#include "workerd/nn/onnx_bridge.h"
#include "workerd/onnx/onnx_importer.h"
#include "workerd/onnx/onnx_node_view.h"

namespace psrun::onnx_io {

// When node i's op type is one lowered here: imports it (or refuses it, naming the node) and
// returns true; false for any other op.
Result<bool> import_lowering(Importer& importer, int i);
// The op types lowered here (the fuzz dictionary lists them).
std::vector<std::string_view> lowered_onnx_ops();
// ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSumExp onto reduce_sum/reduce_max, abs, mul,
// sqrt, exp, log (onnx_lowerings_reduce.cpp); axes per the node's opset (an input from 18).
Result<void> lower_reduce_norm(nn::OnnxNodeImport& node);
// GatherElements (torch.gather) as a one-hot mask of the indices times the data, summed;
// ScatterElements (x.scatter) from the same mask (onnx_lowerings_gather.cpp).
Result<void> lower_gather_elements(nn::OnnxNodeImport& node);
Result<void> lower_scatter_elements(nn::OnnxNodeImport& node);
// Gather of a float table without a batch axis ([V] class weights, a [V, D] Constant or buffer
// value, a parameter's transform) by int ids computed at run time (weight[target]): true when
// node is such a Gather and not an embedding's lookup (a [V, D] float initializer by ids: the
// embedding kind's). Lowered to a one-hot product; tables of up to kMaxTableByIds entries.
inline constexpr std::int64_t kMaxTableByIds = 4096;
bool gathers_table_by_ids(const nn::OnnxNodeImport& node);
Result<void> lower_gather_by_ids(nn::OnnxNodeImport& node);

}  // namespace psrun::onnx_io
