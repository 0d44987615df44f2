// An ONNX If or Loop becomes inline nodes, so that the engine trains one graph for every batch. One whose
// condition is known at import (onnx_consts.h: shape arithmetic, constants) becomes its taken
// branch: torch.onnx writes x.squeeze(d) as If(Shape(x)[d] == 1, Squeeze, Identity) where its own
// shape inference lost dim d (after a reflect Pad, for one). One whose condition is computed from
// the data (`if x.sum() > 0:` in a torch.jit.script'ed module) becomes both branches and a Where
// of the condition on their outputs: the same values, and the same gradients (the branch not
// taken gets none), for the price of computing both. A Loop that runs a number of times known at
// import (a scripted `for t in range(x.size(1))`) becomes that many copies of its body. The
// importer stops at the first If or Loop (Importer::run's StaticIf, LoopUnroll); inline_branch or
// unroll_loop rewrites a copy of the graph and the import starts again from the rewritten graph
// (onnx_import.cpp).
#pragma once

#include <cstdint>

#include "common/result.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io {

// Most If nodes one import inlines (a graph of more is refused: each costs a new walk).
inline constexpr int kMaxInlinedIfs = 256;

// Node `node` of a graph is an If whose condition is `then_branch` (known at import), or computed
// from the data (`both`).
struct StaticIf {
    int node = 0;
    bool then_branch = true;
    bool both = false;
};

// Node `node` of a graph is a Loop to run `trips` times (its condition true throughout), in a
// graph of opset `opset`.
struct LoopUnroll {
    int node = 0;
    std::int64_t trips = 1;
    std::int64_t opset = 13;
};

// Replaces graph.node(unroll.node) (a Loop) with `trips` copies of its body, in place: copy t
// reads the iteration number t (an int64 initializer) and the loop-carried values copy t - 1
// wrote (the Loop's inputs for copy 0); its values are renamed "<name>/iter_<t>" where taken, the
// body's initializers added once. The Loop's outputs become Identity nodes of the last copy's
// carried values, and, for each scan output, a Concat over the copies of their values Unsqueezed
// on axis 0. Errors (kInvalidArgument, naming the node): a body whose inputs or outputs do not
// match the Loop's.
Result<void> unroll_loop(onnx::GraphProto& graph, const LoopUnroll& unroll);

// Replaces graph.node(choice.node) (an If) with the nodes of its taken branch (or of both), in
// place. The branches' own values (node outputs, initializers) are renamed where their names are
// taken in `graph` (and the renaming reaches graphs nested in the branches' nodes); their
// initializers move to `graph`; each If output becomes an Identity of the branch's output (or a
// Where of the If's condition on the two branches' outputs). Errors (kInvalidArgument,
// naming the node): no such branch attribute, a branch with inputs, or outputs of another count
// than the If's.
Result<void> inline_branch(onnx::GraphProto& graph, const StaticIf& choice);

}  // namespace psrun::onnx_io
