// One layer of a model description: its options (as parsed, defaults filled in) and what shape
// inference derived from them. Each kind lives in one file (layer_conv2d.cpp, layer_pool.cpp,
// layer_dense.cpp, layer_pointwise.cpp) as a LayerKindOps: its JSON fields and defaults, its
// shape rule, its parameter tensors and its FLOP count. Adding a kind = one such file plus a
// line in layer_kinds.cpp.
//
// FLOP convention (forward, per example): a multiply-add counts 2; a bias add, an activation
// (relu, tanh, sigmoid) and dropout's scale count 1 per element; pooling counts one operation
// per window element read (KH*KW per output, padding included). The loss is not counted.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/nn/field_reader.h"
#include "workerd/nn/initializer.h"
#include "workerd/nn/shape.h"

namespace psrun::nn {

enum class LayerKind : std::uint8_t { kConv2d, kMaxPool, kAvgPool, kDense, kRelu, kTanh, kSigmoid, kDropout };

// A parameter tensor in its plain layout: conv weights [O, I, KH, KW] (oihw), dense weights
// [units, in_features] (oi), biases [O]. name is "<layer>/w" or "<layer>/b".
struct ParamTensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::int64_t size = 0;
    Initializer init;
};

struct LayerSpec {
    LayerKind kind = LayerKind::kRelu;
    std::string name;        // unique in the model; "<kind><n>" (n-th layer of that kind, from 1) by default
    bool named = false;      // name given in the file (error messages quote it)
    // Options (only those of the kind are meaningful; the rest keep these defaults).
    std::int64_t filters = 0;   // conv2d
    std::int64_t units = 0;     // dense
    Extent2 kernel;             // conv2d kernel, pooling window
    Extent2 stride;             // conv2d (default 1), pools (default = window)
    Padding padding = Padding::kValid;
    bool bias = true;           // conv2d, dense
    Initializer weight_init{InitKind::kGlorotUniform, 0.0};
    Initializer bias_init{InitKind::kZeros, 0.0};
    double keep_prob = 1.0;     // dropout (rate = 1 - keep_prob)
    // Derived by shape inference.
    ActivationShape input;
    ActivationShape output;
    Pads pads;                  // conv2d and pools; TF's SAME split (extra row/column at the end)
    std::vector<ParamTensor> params;
    std::int64_t param_count = 0;
    double flops = 0.0;         // forward, per example (convention above)
};

struct LayerKindOps {
    LayerKind kind;
    std::string_view name;  // JSON "kind"
    // Reads the kind's options (reader has "kind" and "name" allowed already).
    Result<void> (*parse)(FieldReader& reader, LayerSpec& layer);
    // REQUIRES: layer.input set. Sets output, pads, params, param_count, flops, or returns a
    // message without location (the caller prefixes the layer).
    Result<void> (*infer)(LayerSpec& layer);
    // Writes the options in canonical form (all defaults explicit) into `out`.
    void (*write)(const LayerSpec& layer, nlohmann::json& out);
};

// nullptr when unknown.
const LayerKindOps* find_layer_kind(std::string_view name);
const LayerKindOps& layer_kind_ops(LayerKind kind);
std::vector<std::string_view> layer_kind_names();

// The per-kind tables (one per file).
const LayerKindOps& conv2d_ops();
const LayerKindOps& max_pool_ops();
const LayerKindOps& avg_pool_ops();
const LayerKindOps& dense_ops();
const LayerKindOps& relu_ops();
const LayerKindOps& tanh_ops();
const LayerKindOps& sigmoid_ops();
const LayerKindOps& dropout_ops();

// Shared by the kinds: an error without location; a parameter tensor (size checked).
Error layer_error(std::string message);
Result<ParamTensor> make_param(const std::string& name, std::vector<std::int64_t> shape, const Initializer& init);

}  // namespace psrun::nn

namespace psrun::nn {
// conv2d and dense: "bias" (default true), "weight_init" (default glorot_uniform) and
// "bias_init" (default zeros; an error when bias is false).
Result<void> parse_trainable_options(FieldReader& reader, LayerSpec& layer);
void write_trainable_options(const LayerSpec& layer, nlohmann::json& out);
}  // namespace psrun::nn
