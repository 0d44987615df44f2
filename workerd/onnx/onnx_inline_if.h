// An ONNX If whose condition is known at import (onnx_consts.h: shape arithmetic, constants)
// becomes its taken branch. torch.onnx writes x.squeeze(d) as If(Shape(x)[d] == 1, Squeeze,
// Identity) where its own shape inference lost dim d (after a reflect Pad, for one), and the
// engine trains one graph for every batch, so only such an If can be imported. The importer
// stops at the first such If (Importer::run's StaticIf); inline_branch rewrites a copy of the
// graph and the import starts again from the rewritten graph (onnx_import.cpp).
#pragma once

#include "common/result.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io {

// Most If nodes one import inlines (a graph of more is refused: each costs a new walk).
inline constexpr int kMaxInlinedIfs = 256;

// Node `node` of a graph is an If whose condition is `then_branch`.
struct StaticIf {
    int node = 0;
    bool then_branch = true;
};

// Replaces graph.node(choice.node) (an If) with the nodes of its taken branch, in place. The
// branch's own values (node outputs, initializers) are renamed where their names are taken in
// `graph` (and the renaming reaches graphs nested in the branch's nodes); its initializers move to
// `graph`; each If output becomes an Identity of the branch's output. Errors (kInvalidArgument,
// naming the node): no such branch attribute, a branch with inputs, or outputs of another count
// than the If's.
Result<void> inline_branch(onnx::GraphProto& graph, const StaticIf& choice);

}  // namespace psrun::onnx_io
