// The entry points of the operator kinds in this folder: each kind's (or family's) schema, as
// op_registry.cpp lists them, and its kernel factory, as kernel_registry.cpp and fusion.cpp
// use them. A new kind adds its lines here.
#pragma once

#include <memory>
#include <vector>

namespace psrun::nn {

struct OpSchema;
class Kernel;

// Schemas (ops/<file>.cpp).
const OpSchema& conv2d_schema();
const OpSchema& conv_transpose_schema();
const OpSchema& resize_schema();
const OpSchema& max_pool_schema();
const OpSchema& avg_pool_schema();
const OpSchema& global_avg_pool_schema();
const OpSchema& global_max_pool_schema();
const OpSchema& dense_schema();
const OpSchema& dropout_schema();
const OpSchema& identity_schema();
std::vector<const OpSchema*> activation_schemas();
const OpSchema& parameter_schema();
const OpSchema& constant_schema();
const OpSchema& reshape_schema();
const OpSchema& flatten_schema();
const OpSchema& squeeze_schema();
const OpSchema& unsqueeze_schema();
const OpSchema& transpose_schema();
std::vector<const OpSchema*> binary_schemas();
const OpSchema& pow_schema();
const OpSchema& erf_schema();
const OpSchema& softmax_schema();
const OpSchema& log_softmax_schema();
const OpSchema& matmul_schema();
const OpSchema& concat_schema();
const OpSchema& split_schema();
const OpSchema& slice_schema();
std::vector<const OpSchema*> reduce_schemas();
const OpSchema& prelu_schema();
const OpSchema& expand_schema();
std::vector<const OpSchema*> select_schemas();
std::vector<const OpSchema*> mask_schemas();
const OpSchema& pad_schema();
const OpSchema& batch_norm_schema();
const OpSchema& layer_norm_schema();
const OpSchema& group_norm_schema();
const OpSchema& embedding_schema();
const OpSchema& gather_schema();
const OpSchema& lstm_schema();
const OpSchema& gru_schema();

// Kernels (ops/<file>_kernel.cpp).
std::unique_ptr<Kernel> make_conv_kernel();
std::unique_ptr<Kernel> make_conv_transpose_kernel();
std::unique_ptr<Kernel> make_resize_kernel();
std::unique_ptr<Kernel> make_pool_kernel();
std::unique_ptr<Kernel> make_dense_kernel();
std::unique_ptr<Kernel> make_activation_kernel();
std::unique_ptr<Kernel> make_dropout_kernel();
std::unique_ptr<Kernel> make_identity_kernel();
std::unique_ptr<Kernel> make_parameter_kernel();
std::unique_ptr<Kernel> make_constant_kernel();
std::unique_ptr<Kernel> make_view_kernel();
std::unique_ptr<Kernel> make_transpose_kernel();
std::unique_ptr<Kernel> make_binary_kernel();
std::unique_ptr<Kernel> make_pow_kernel();
std::unique_ptr<Kernel> make_erf_kernel();
std::unique_ptr<Kernel> make_softmax_kernel();
std::unique_ptr<Kernel> make_matmul_kernel();
std::unique_ptr<Kernel> make_concat_kernel();
std::unique_ptr<Kernel> make_split_kernel();
std::unique_ptr<Kernel> make_slice_kernel();
std::unique_ptr<Kernel> make_reduce_kernel();
std::unique_ptr<Kernel> make_prelu_kernel();
std::unique_ptr<Kernel> make_expand_kernel();
std::unique_ptr<Kernel> make_select_kernel();
std::unique_ptr<Kernel> make_mask_kernel();
std::unique_ptr<Kernel> make_pad_kernel();
std::unique_ptr<Kernel> make_batch_norm_kernel();
std::unique_ptr<Kernel> make_layer_norm_kernel();
std::unique_ptr<Kernel> make_group_norm_kernel();
std::unique_ptr<Kernel> make_embedding_kernel();
std::unique_ptr<Kernel> make_gather_kernel();
std::unique_ptr<Kernel> make_rnn_kernel();
std::unique_ptr<Kernel> make_fused_conv_relu_pool_kernel();
std::unique_ptr<Kernel> make_conv_relu_blocked_pool_kernel();
std::unique_ptr<Kernel> make_conv_bn_kernel();

}  // namespace psrun::nn
