// A model that ends in its own loss (LossKind::kGraph, docs/models.md "Loss in the graph"): its
// output is a float scalar the graph computes from the model's inputs, e.g. torch.onnx's
// SoftmaxCrossEntropyLoss (softmax_cross_entropy_loss), NegativeLogLikelihoodLoss (nll_loss), a
// reduce_mean over every axis of element-wise terms (MSE, BCE), or a weighted sum of several
// heads' losses. The engine trains that scalar as it is.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/nn/model_description.h"

namespace psrun::nn {

// True for the kinds whose data input 1 holds class labels (softmax_cross_entropy_loss, nll_loss).
bool is_label_loss(const Node& node);

// Most heads a description may name.
inline constexpr std::size_t kMaxHeads = 64;

// Sets model.heads of a kGraph model (docs/models.md "Heads"). `given` (the description's
// "heads", each with value, kind and target; width unset) are checked against the graph: the
// value a float [N, C] value of the model, the target an input after the first, int
// [N] for a softmax head and float [N, C] for a sigmoid one, no value twice; they are then the
// heads, in the order given. Without `given` the heads are found in the graph, in the graph
// order of their values:
//   softmax: the scores [N, C] a softmax_cross_entropy_loss or nll_loss reads against an int
//            [N] input (its labels), or per position: scores [N, C, d1, ...] such a loss reads
//            against an int [N, d1, ...] input (segmentation masks; Head::spatial holds d1, ...,
//            Head::ignore_index the loss's);
//   sigmoid: logits X [N, T] in a binary cross-entropy against a float [N, T] input t, written
//            out as torch.onnx writes F.binary_cross_entropy_with_logits / nn.BCEWithLogitsLoss
//            (mul(t, log(sigmoid(X))), either operand order), or in the stable form
//            softplus(X) - X * t (a mul of X and t where a softplus reads X).
// A value found as both keeps the first kind found (softmax). Errors (kInvalidArgument, given
// heads only) start with "heads[i]: " and say what does not fit.
Result<void> resolve_heads(ModelDescription& model, const std::vector<Head>* given);

// Completes a kGraph model after its last node and resolve_heads: checks that the output is a
// float scalar (no batch axis, one element), then sets model.label_input, model.head and
// model.classes. The label input is `labels` when given (an input's name), else the model input
// read as labels by the first label loss node when it is int [N] (per-example class labels), else
// none. An int label input must be the target of a softmax head: the first such head is
// model.head and its C the classes; a float label input must be [N, T] (targets; classes = T). The
// primary input is never the label input. Errors (kInvalidArgument) say what does not fit and
// what to do, without a prefix.
Result<void> resolve_graph_loss(ModelDescription& model, const std::string& labels);

}  // namespace psrun::nn
