// A model that ends in its own loss (LossKind::kGraph, docs/models.md "Loss in the graph"): its
// output is a float scalar the graph computes from the model's inputs, e.g. torch.onnx's
// SoftmaxCrossEntropyLoss (softmax_cross_entropy_loss), NegativeLogLikelihoodLoss (nll_loss), a
// reduce_mean over every axis of element-wise terms (MSE, BCE), or a weighted sum of several
// heads' losses. The engine trains that scalar as it is.
#pragma once

#include <string>

#include "common/result.h"
#include "workerd/nn/model_description.h"

namespace psrun::nn {

// True for the kinds whose data input 1 holds class labels (softmax_cross_entropy_loss, nll_loss).
bool is_label_loss(const Node& node);

// Completes a kGraph model after its last node: checks that the output is a float scalar (no
// batch axis, one element), then sets model.label_input, model.head and model.classes.
// The label input is `labels` when given (an input's name), else the model input read as labels
// by the first label loss node when it is int [N] (per-example class labels), else none. An int
// label input must be read as labels by a label loss node whose scores are [N, C]: that node's
// scores are the head and C the classes; a float label input must be [N, T] (targets; classes
// = T). The primary input is never the label input. Errors (kInvalidArgument) say what does not
// fit and what to do, without a prefix.
Result<void> resolve_graph_loss(ModelDescription& model, const std::string& labels);

}  // namespace psrun::nn
