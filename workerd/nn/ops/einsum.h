// ONNX Einsum (opset 12+, torch.einsum's export) lowered at import to the engine's kinds: no
// einsum kind exists, so export writes the lowered nodes and training runs their kernels.
//
// parse_einsum (einsum_equation.cpp): the equation of any number of operands (3 or more lower as
// a chain of pairs: pairwise_einsum), explicit ("bij,bjk->bik")
// or implicit ("ij,jk": the letters seen once, in ASCII order, after "..." when an operand has
// one), spaces ignored, letters a-z A-Z, at most one "..." per term (numpy's broadcasting
// ellipsis, right-aligned across operands). Refused: anything else, a letter repeated within
// one operand (import_einsum takes such diagonals first: a transpose, a reshape and a gather),
// an output letter repeated or in no operand.
//
// plan_einsum (einsum_plan.cpp): every label (a letter, or one dim "..." covers) gets a role:
//   batch       in both operands and the output      leading axes of the matmul (broadcast)
//   contracted  in both, not in the output           matmul's inner dim K (all merged)
//   left_free   in operand 0 and the output only     matmul's M (merged)
//   right_free  in operand 1 and the output only     matmul's P (merged)
//   summed      in one operand only, not the output  reduce_sum first (one operand: every
//               letter not in the output)
// Two operands: reduce_sum each operand's summed axes; with contracted labels, transpose each
// operand to [batch..., M..., K...] / [batch..., K..., P...], reshape to [batch..., M, K] /
// [batch..., K, P], matmul, reshape to [batch..., M..., P...], transpose to the output's order;
// without, transpose each to the output's order, reshape to insert 1s for what it lacks, mul
// (broadcasting). One operand: reduce_sum, then transpose. Steps that would change nothing
// (identity perms, same-shape reshapes) are left out. The operands' roles swap when the model's
// batch axis would otherwise be a right-free label, so that it stays leading in the matmul.
// A contracted label of size 1 in one operand and n in the other is summed in both. Refused:
// sizes that differ (and are not 1 against n), a contraction or sum over the batch axis,
// more than 4 batch labels or results beyond rank 6.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/nn/tensor_shape.h"

namespace psrun::nn {

class OnnxNodeImport;

// An equation's terms with the ellipsis marked: each term lists its letters, and '.' stands
// for the whole "..." (at most one per term).
struct EinsumEquation {
    std::vector<std::string> inputs;
    std::string output;
    bool explicit_output = false;
};

// Errors (kInvalidArgument) without location: the caller names the node and the equation.
Result<EinsumEquation> parse_einsum(std::string_view text, std::size_t operands);

// An equation of 3 or more operands as a chain of explicit 2-operand equations, left to right:
// each pair's result keeps the labels (and "...") that a later operand or the output reads, so
// "bi,oij,bj->bo" is "bi,oij->boj" then "boj,bj->bo". REQUIRES: eq.inputs.size() >= 2.
std::vector<std::string> pairwise_einsum(const EinsumEquation& eq);

enum class EinsumRole { kBatch, kContracted, kLeftFree, kRightFree, kSummed };
const char* to_string(EinsumRole role);

struct EinsumLabel {
    std::string name;  // "i", or "...0", "...1" for the dims an ellipsis covers (left to right)
    EinsumRole role = EinsumRole::kBatch;
    Dim size;  // the output's size (the larger of the operands')
};

// One description layer of the lowering. Values: 0 .. operands-1 are the operands, operands + k
// the output of step k.
struct EinsumStep {
    std::string kind;   // "reduce_sum", "transpose", "reshape", "matmul", "mul"
    std::string label;  // what it is for ("a_sum", "b_transpose", "matmul", "out_reshape", ...)
    std::vector<std::size_t> inputs;
    nlohmann::json attrs;  // the kind's fields (axes/keepdims, perm, shape)
    Dims dims;             // its output's dims
};

struct EinsumPlan {
    std::vector<EinsumLabel> labels;  // in order of first appearance (operand 0, 1, output)
    std::vector<EinsumStep> steps;
    std::size_t result = 0;  // the value that is the einsum's output (an operand when no step)
    Dims dims;               // the output's dims
};

// The lowering of `equation` on operands of `operands` dims (symbolic in the batch size).
// Errors (kInvalidArgument) without location.
Result<EinsumPlan> plan_einsum(std::string_view equation, const std::vector<Dims>& operands);

// ONNX Einsum (einsum_import.cpp): emits the plan's layers, or refuses naming the node, op
// Einsum and the equation.
Result<void> import_einsum(OnnxNodeImport& node);

}  // namespace psrun::nn
