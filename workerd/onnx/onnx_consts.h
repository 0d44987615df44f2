// What the importer evaluates while it reads a graph, so that it never runs at training time:
// constants (initializers of integer type, Constant nodes) and the shape arithmetic PyTorch
// emits (Shape, Gather on shapes, Unsqueeze, Concat, Slice, Cast, Mul/Div/Add/Sub, Max/Min of
// two, Equal/Less/Greater, Not, Neg/Abs/Sqrt/Log/Exp/Floor/Ceil/Reciprocal, Where, ConstantOfShape, Range, Expand (one
// value to a batch-dependent shape: a fill), Reshape, Transpose, Split, Trilu and EyeLike of known tensors, ReduceProd
// (and ReduceSum/Max/Min of integers: the element count x.std(dim) divides by)). Integers may be multiples of the batch
// size N (Shape of a value with a batch axis), so one import serves every batch size; arithmetic that would need N's
// value (N + 1, N * N) is not evaluated.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/nn/tensor_shape.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io {

struct Known {
    std::vector<std::int64_t> dims;  // the tensor's shape (empty: a scalar)
    bool is_float = false;
    std::vector<double> f;   // is_float: the values, row-major
    std::vector<nn::Dim> i;  // !is_float: the values (Dim::value may be <= 0)
    // ConstantOfShape of a shape that depends on N: every element is `fill`, the shape is
    // `symbolic_dims` (dims and the vectors above stay empty).
    std::optional<nn::Dims> symbolic_dims;
    double fill = 0.0;
    // The ONNX element type (onnx::TensorProto::DataType) of a constant read from a tensor or
    // made by a Cast; 0 for other values computed at import.
    int onnx_type = 0;

    std::size_t size() const;
    // The integers when none depends on N.
    std::optional<std::vector<std::int64_t>> plain_ints() const;
};

// A Known from a TensorProto (float, double, int8/32/64, uint8, bool).
Result<Known> known_from_tensor(const onnx::TensorProto& tensor);

// Evaluates `node` whose inputs are known (`inputs[i]` null for an absent optional input) or,
// for Shape, whose input has shape `shape_of` (null otherwise). Returns the outputs, nullopt
// when the op is not one this evaluates or an integer would need N's value, or an error for a
// malformed node (out-of-range indices, mismatched shapes).
Result<std::optional<std::vector<Known>>> evaluate(const onnx::NodeProto& node, std::int64_t opset,
                                                   const std::vector<const Known*>& inputs,
                                                   const nn::ValueInfo* shape_of);

}  // namespace psrun::onnx_io
