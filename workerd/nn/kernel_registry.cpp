// The kernel of every operator kind (op_registry.cpp lists the schemas): one line per kind.
#include <map>

#include "workerd/nn/fusion.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {


namespace {

using Factory = std::unique_ptr<Kernel> (*)();

const std::map<std::string, Factory>& factories() {
    static const std::map<std::string, Factory> table = {
        {"conv2d", make_conv_kernel},
        {"conv_transpose", make_conv_transpose_kernel},
        {"resize", make_resize_kernel},
        {"max_pool", make_pool_kernel},
        {"avg_pool", make_pool_kernel},
        {"global_avg_pool", make_pool_kernel},
        {"global_max_pool", make_pool_kernel},
        {"dense", make_dense_kernel},
        {"dropout", make_dropout_kernel},
        {"identity", make_identity_kernel},
        {"parameter", make_parameter_kernel},
        {"constant", make_constant_kernel},
        {"reshape", make_view_kernel},
        {"flatten", make_view_kernel},
        {"squeeze", make_view_kernel},
        {"unsqueeze", make_view_kernel},
        {"transpose", make_transpose_kernel},
        {"batch_norm", make_batch_norm_kernel},
        {"layer_norm", make_layer_norm_kernel},
        {"group_norm", make_group_norm_kernel},
        {"embedding", make_embedding_kernel},
        {"gather", make_gather_kernel},
        {"lstm", make_rnn_kernel},
        {"gru", make_rnn_kernel},
        {"relu", make_activation_kernel},
        {"tanh", make_activation_kernel},
        {"sigmoid", make_activation_kernel},
        {"leaky_relu", make_activation_kernel},
        {"elu", make_activation_kernel},
        {"clip", make_activation_kernel},
        {"gelu", make_activation_kernel},
        {"exp", make_activation_kernel},
        {"log", make_activation_kernel},
        {"sqrt", make_activation_kernel},
        {"abs", make_activation_kernel},
        {"softplus", make_activation_kernel},
        {"swish", make_activation_kernel},
        {"hard_swish", make_activation_kernel},
        {"neg", make_activation_kernel},
        {"add", make_binary_kernel},
        {"sub", make_binary_kernel},
        {"mul", make_binary_kernel},
        {"div", make_binary_kernel},
        {"pow", make_pow_kernel},
        {"erf", make_erf_kernel},
        {"softmax", make_softmax_kernel},
        {"log_softmax", make_softmax_kernel},
        {"matmul", make_matmul_kernel},
        {"concat", make_concat_kernel},
        {"split", make_split_kernel},
        {"slice", make_slice_kernel},
        {"pad", make_pad_kernel},
        {"reduce_mean", make_reduce_kernel},
        {"reduce_sum", make_reduce_kernel},
        {"reduce_max", make_reduce_kernel},
        {"reduce_min", make_reduce_kernel},
        {"selu", make_activation_kernel},
        {"hard_sigmoid", make_activation_kernel},
        {"mish", make_activation_kernel},
        {"reciprocal", make_activation_kernel},
        {"prelu", make_prelu_kernel},
        {"expand", make_expand_kernel},
        {"maximum", make_select_kernel},
        {"minimum", make_select_kernel},
        {"where", make_select_kernel},
        {"equal", make_mask_kernel},
        {"less", make_mask_kernel},
        {"greater", make_mask_kernel},
        {"not", make_mask_kernel},
        {"cast", make_mask_kernel},
    };
    return table;
}

}  // namespace

std::unique_ptr<Kernel> make_kernel(const std::string& kind) {
    const auto it = factories().find(kind);
    return it == factories().end() ? nullptr : it->second();
}

std::vector<std::string> kernel_kinds() {
    std::vector<std::string> kinds;
    for (const auto& [kind, factory] : factories()) kinds.push_back(kind);
    return kinds;
}

}  // namespace psrun::nn
