#include "workerd/onnx/onnx_chain_builder.h"

#include <optional>

namespace psrun::onnx_io {

namespace {

#define TRY_ATTR(var, expr)                                                       \
    auto var##_or = (expr);                                                       \
    if (!var##_or) return tl::unexpected(refuse(node, var##_or.error().message)); \
    const auto var = *var##_or

const char* activation_kind(const std::string& op) {
    if (op == "Relu") return "relu";
    if (op == "Tanh") return "tanh";
    if (op == "Sigmoid") return "sigmoid";
    return nullptr;
}

}  // namespace

ChainBuilder::ChainBuilder(const GraphIndex& graph, nn::ActivationShape input, bool input_is_2d,
                           std::int64_t opset)
    : graph_(graph),
      opset_(opset),
      shape_(input),
      flattened_(input_is_2d),
      current_(graph.input().name()) {}

Error ChainBuilder::refuse(const onnx::NodeProto& node, const std::string& what) const {
    return Error{ErrorCode::kInvalidArgument,
                 node_label(node, graph_.node_index(&node)) + ": " + what};
}

void ChainBuilder::push(nlohmann::json layer, const onnx::NodeProto& node, ImportedParams params) {
    layers_.push_back(std::move(layer));
    params_.push_back(std::move(params));
    layer_nodes_.push_back(node_label(node, graph_.node_index(&node)));
}

Result<std::vector<float>> ChainBuilder::constant_floats(const onnx::NodeProto& node,
                                                         int input) const {
    const auto* t = graph_.constant(node.input(input));
    if (t == nullptr)
        return tl::unexpected(
            refuse(node, "input " + std::to_string(input) + " ('" + node.input(input) +
                             "') is no initializer or Constant: the engine needs its weights "
                             "as constants in the file"));
    auto values = read_floats(*t);
    if (!values) return tl::unexpected(refuse(node, values.error().message));
    return values;
}

Result<void> ChainBuilder::check_data_input(const onnx::NodeProto& node) const {
    if (node.input_size() < 1 || node.input(0) != current_)
        return tl::unexpected(
            refuse(node, "the chain's value '" + current_ + "' is not its first input"));
    return {};
}

Result<std::size_t> ChainBuilder::add(std::size_t i) {
    const auto& chain = graph_.chain();
    const onnx::NodeProto& node = *chain[i];
    const std::string& op = node.op_type();
    const onnx::NodeProto* next = i + 1 < chain.size() ? chain[i + 1] : nullptr;
    std::size_t used = 1;
    if (auto ok = check_data_input(node); !ok) return tl::unexpected(ok.error());
    Result<void> done;
    if (op == "Conv") {
        done = conv(node);
    } else if (op == "MaxPool" || op == "AveragePool") {
        done = pool(node, op == "MaxPool");
    } else if (const char* kind = activation_kind(op)) {
        push({{"kind", kind}}, node);
    } else if (op == "Flatten") {
        done = flatten(node);
    } else if (op == "Reshape") {
        done = reshape(node);
    } else if (op == "Gemm" || op == "MatMul") {
        auto n = dense(node, next);
        if (!n) return tl::unexpected(n.error());
        used = *n;
    } else if (op == "Dropout") {
        done = dropout(node);
    } else if (op == "Identity") {
        // nothing: PyTorch's eval-mode dropout
    } else if (op == "Pad") {
        done = zero_pad(node);
    } else if (op == "Softmax" || op == "LogSoftmax") {
        done = final_softmax(node);
    } else {
        return tl::unexpected(
            refuse(node,
                   "the engine has no such layer (it trains Conv, MaxPool, AveragePool, "
                   "Relu, Tanh, Sigmoid, Flatten, Reshape to [N, F], Gemm, MatMul+Add, "
                   "Dropout, Identity, a Pad of zeros and a final Softmax/LogSoftmax)"));
    }
    if (!done) return tl::unexpected(done.error());
    current_ = chain[i + used - 1]->output(0);
    return used;
}

Result<void> ChainBuilder::window(const onnx::NodeProto& node, std::int64_t kh, std::int64_t kw,
                                  nlohmann::json& layer, bool& padded) {
    TRY_ATTR(strides, ints_attr(node, "strides"));
    TRY_ATTR(pads, ints_attr(node, "pads"));
    TRY_ATTR(dilations, ints_attr(node, "dilations"));
    TRY_ATTR(auto_pad, string_attr(node, "auto_pad", "NOTSET"));
    if (dilations && *dilations != std::vector<std::int64_t>{1, 1})
        return tl::unexpected(refuse(node, "dilations " + ints_text(*dilations) +
                                               ": the engine has no dilation (1, 1 only)"));
    const std::vector<std::int64_t> s = strides.value_or(std::vector<std::int64_t>{1, 1});
    if (s.size() != 2 || s[0] < 1 || s[1] < 1 || s[0] > nn::kMaxTensorElements ||
        s[1] > nn::kMaxTensorElements)
        return tl::unexpected(
            refuse(node, "strides " + ints_text(s) + ": need two positive values"));
    if (kh < 1 || kw < 1 || kh > nn::kMaxTensorElements || kw > nn::kMaxTensorElements)
        return tl::unexpected(
            refuse(node, "kernel " + ints_text({kh, kw}) + ": need two positive values"));
    const std::vector<std::int64_t> p = pads.value_or(std::vector<std::int64_t>{0, 0, 0, 0});
    if (p.size() != 4 || p[0] < 0 || p[1] < 0 || p[2] < 0 || p[3] < 0)
        return tl::unexpected(refuse(node, "pads " + ints_text(p) + ": need four values >= 0"));
    const bool zero = p == std::vector<std::int64_t>{0, 0, 0, 0};
    const auto same_h = nn::plan_axis(shape_.height, kh, s[0], nn::Padding::kSame);
    const auto same_w = nn::plan_axis(shape_.width, kw, s[1], nn::Padding::kSame);
    const std::vector<std::int64_t> same{same_h.pad_before, same_w.pad_before, same_h.pad_after,
                                         same_w.pad_after};
    nn::Padding padding = nn::Padding::kValid;
    if (auto_pad == "SAME_UPPER") {
        padding = nn::Padding::kSame;
    } else if (auto_pad == "SAME_LOWER") {
        if (same_h.pad_before != same_h.pad_after || same_w.pad_before != same_w.pad_after)
            return tl::unexpected(
                refuse(node,
                       "auto_pad SAME_LOWER puts the odd padding first: the engine pads as TF "
                       "(SAME_UPPER)"));
        padding = nn::Padding::kSame;
    } else if (auto_pad == "VALID" || ((auto_pad == "NOTSET" || auto_pad.empty()) && zero)) {
        padding = nn::Padding::kValid;
    } else if (auto_pad == "NOTSET" || auto_pad.empty()) {
        if (p != same)
            return tl::unexpected(
                refuse(node, "pads " + ints_text(p) + " on a " + shape_.to_string() +
                                 " input are neither none (valid) nor TF's same split " +
                                 ints_text(same) + ": the engine cannot pad that way"));
        padding = nn::Padding::kSame;
    } else {
        return tl::unexpected(refuse(
            node, "auto_pad '" + auto_pad + "' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER"));
    }
    if (padding == nn::Padding::kValid && (kh > shape_.height || kw > shape_.width))
        return tl::unexpected(refuse(node, "kernel " + ints_text({kh, kw}) +
                                               " without padding on a " + shape_.to_string() +
                                               " input: the output would be empty"));
    const auto h = nn::plan_axis(shape_.height, kh, s[0], padding);
    const auto w = nn::plan_axis(shape_.width, kw, s[1], padding);
    padded = h.pad_before + h.pad_after + w.pad_before + w.pad_after > 0;
    layer["stride"] = {s[0], s[1]};
    layer["padding"] = padding == nn::Padding::kSame ? "same" : "valid";
    shape_.height = h.out;
    shape_.width = w.out;
    return {};
}

Result<void> ChainBuilder::conv(const onnx::NodeProto& node) {
    if (flattened_)
        return tl::unexpected(
            refuse(node, "after a Flatten: the engine's conv2d needs an image input"));
    if (node.input_size() < 2) return tl::unexpected(refuse(node, "has no weight input"));
    TRY_ATTR(group, int_attr(node, "group", 1));
    if (group != 1)
        return tl::unexpected(refuse(
            node, "group " + std::to_string(group) + ": the engine has no grouped convolution"));
    const auto* wt = graph_.constant(node.input(1));
    if (wt == nullptr)
        return tl::unexpected(
            refuse(node, "weight '" + node.input(1) + "' is a missing initializer"));
    ImportedParams params;
    params.w_dims.assign(wt->dims().begin(), wt->dims().end());
    if (params.w_dims.size() != 4 || params.w_dims[1] != shape_.channels || params.w_dims[0] < 1)
        return tl::unexpected(refuse(node, "weight dims " + ints_text(params.w_dims) +
                                               " are not [O, " + std::to_string(shape_.channels) +
                                               ", KH, KW] for a " + shape_.to_string() + " input"));
    auto w = constant_floats(node, 1);
    if (!w) return tl::unexpected(w.error());
    params.w = std::move(*w);
    const std::int64_t filters = params.w_dims[0];
    TRY_ATTR(kernel, ints_attr(node, "kernel_shape"));
    if (kernel && *kernel != std::vector<std::int64_t>{params.w_dims[2], params.w_dims[3]})
        return tl::unexpected(refuse(node, "kernel_shape " + ints_text(*kernel) +
                                               " differs from the weights' " +
                                               ints_text({params.w_dims[2], params.w_dims[3]})));
    if (node.input_size() > 2 && !node.input(2).empty()) {
        auto b = constant_floats(node, 2);
        if (!b) return tl::unexpected(b.error());
        if (static_cast<std::int64_t>(b->size()) != filters)
            return tl::unexpected(refuse(node, "bias of " + std::to_string(b->size()) +
                                                   " values for " + std::to_string(filters) +
                                                   " filters"));
        params.b = std::move(*b);
    }
    nlohmann::json layer{{"kind", "conv2d"},
                         {"filters", filters},
                         {"kernel", {params.w_dims[2], params.w_dims[3]}},
                         {"bias", !params.b.empty()}};
    bool padded = false;
    if (auto ok = window(node, params.w_dims[2], params.w_dims[3], layer, padded); !ok) return ok;
    shape_.channels = filters;
    if (!nn::checked_product({shape_.channels, shape_.height, shape_.width}))
        return tl::unexpected(refuse(node, "its output is too large"));
    push(std::move(layer), node, std::move(params));
    return {};
}

Result<void> ChainBuilder::pool(const onnx::NodeProto& node, bool max) {
    if (flattened_)
        return tl::unexpected(
            refuse(node, "after a Flatten: the engine's pools need an image input"));
    TRY_ATTR(ceil_mode, int_attr(node, "ceil_mode", 0));
    if (ceil_mode != 0)
        return tl::unexpected(
            refuse(node, "ceil_mode=1: the engine's pools round the output size down"));
    TRY_ATTR(storage_order, int_attr(node, "storage_order", 0));
    if (storage_order != 0) return tl::unexpected(refuse(node, "storage_order=1 is not supported"));
    TRY_ATTR(include_pad, int_attr(node, "count_include_pad", 0));
    TRY_ATTR(kernel, ints_attr(node, "kernel_shape"));
    if (!kernel || kernel->size() != 2)
        return tl::unexpected(refuse(node, "needs kernel_shape with two values"));
    nlohmann::json layer{{"kind", max ? "max_pool" : "avg_pool"},
                         {"window", {(*kernel)[0], (*kernel)[1]}}};
    bool padded = false;
    if (auto ok = window(node, (*kernel)[0], (*kernel)[1], layer, padded); !ok) return ok;
    if (!max && padded && include_pad != 0)
        return tl::unexpected(
            refuse(node,
                   "count_include_pad=1 with padding: the engine averages over the real "
                   "inputs only (count_include_pad=0)"));
    push(std::move(layer), node);
    return {};
}

Result<void> ChainBuilder::zero_pad(const onnx::NodeProto& node) {
    // PyTorch 1.13 puts a Pad of zeros before an AvgPool2d with count_include_pad (its default).
    const auto* t = node.input_size() > 1 ? graph_.constant(node.input(1)) : nullptr;
    if (t == nullptr) return tl::unexpected(refuse(node, "its pads are not a constant"));
    auto pads = read_int64s(*t);
    if (!pads) return tl::unexpected(refuse(node, pads.error().message));
    for (const auto p : *pads)
        if (p != 0)
            return tl::unexpected(
                refuse(node, "pads " + ints_text(*pads) +
                                 ": the engine pads only inside a Conv or "
                                 "pool (give the padding to the Conv/pool, TF's same split)"));
    return {};
}

Result<void> ChainBuilder::flatten(const onnx::NodeProto& node) {
    TRY_ATTR(axis, int_attr(node, "axis", 1));
    if (axis != 1)
        return tl::unexpected(refuse(
            node, "axis " + std::to_string(axis) + ": the engine flattens to [N, F] (axis 1)"));
    flattened_ = true;
    return {};
}

Result<void> ChainBuilder::reshape(const onnx::NodeProto& node) {
    if (node.input_size() < 2) return tl::unexpected(refuse(node, "has no shape input"));
    const auto* t = graph_.constant(node.input(1));
    if (t == nullptr)
        return tl::unexpected(refuse(
            node, "its shape '" + node.input(1) +
                      "' is computed, not a constant: the engine "
                      "needs a constant shape [-1, F] (export with x.flatten(1) or nn.Flatten)"));
    auto dims = read_int64s(*t);
    if (!dims) return tl::unexpected(refuse(node, dims.error().message));
    const std::int64_t features = shape_.elements();
    const auto& d = *dims;
    const bool ok = d.size() == 2 &&
                    ((d[0] == -1 || d[0] == 0) && (d[1] == features || (d[0] == 0 && d[1] == -1)));
    if (!ok)
        return tl::unexpected(refuse(node, "shape " + ints_text(d) + " on a " + shape_.to_string() +
                                               " input is not a flatten to [N, " +
                                               std::to_string(features) + "]"));
    flattened_ = true;
    return {};
}

}  // namespace psrun::onnx_io
