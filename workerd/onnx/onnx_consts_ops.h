// Private to the import-time evaluator (onnx_consts.h): the helpers its two files share, and
// the layout operators (Unsqueeze, Squeeze, Concat, Gather, Slice, Reshape, Transpose, Expand,
// ConstantOfShape, Range) that onnx_consts_layout.cpp evaluates for evaluate() in
// onnx_consts.cpp, which keeps the element-wise ones (Shape, Identity, Cast, arithmetic,
// comparisons, unary, Where).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "workerd/onnx/onnx_consts.h"

namespace psrun::onnx_io::consts_detail {

using nn::Dim;
// nullopt: not evaluated (an op or input this does not handle, or N's value needed).
using Outputs = std::optional<std::vector<Known>>;

// kInvalidArgument naming the node and its op type.
Error bad(const onnx::NodeProto& node, const std::string& what);
// The element count; INT64_MAX where it overflows (shapes from a file can be anything).
std::int64_t product(const std::vector<std::int64_t>& dims);
// Values larger than this are not evaluated at import (broadcasts and gathers can grow them).
constexpr std::int64_t kMaxKnownElements = std::int64_t{1} << 22;
// ONNX's int64 arithmetic on values from a file: two's complement wrap-around (as numpy), where
// C++'s signed overflow would be undefined.
std::int64_t wrap_add(std::int64_t a, std::int64_t b);
std::int64_t wrap_sub(std::int64_t a, std::int64_t b);
std::int64_t wrap_mul(std::int64_t a, std::int64_t b);
// A double to int64 toward zero, saturating at the type's limits (NaN: 0), where a plain cast
// of a value out of range would be undefined.
std::int64_t saturate_int(double x);
std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& dims);
// Element `flat` of a tensor of `dims` read through broadcasting from a tensor of `from`.
std::size_t broadcast_index(std::int64_t flat, const std::vector<std::int64_t>& dims,
                            const std::vector<std::int64_t>& from);
// numpy's broadcast of two shapes; nullopt when they do not broadcast.
std::optional<std::vector<std::int64_t>> broadcast_dims(const std::vector<std::int64_t>& a,
                                                        const std::vector<std::int64_t>& b);
Known make_ints(std::vector<std::int64_t> dims, std::vector<Dim> values);
Known make_floats(std::vector<std::int64_t> dims, std::vector<double> values);
// Element i as a double (an integer's value, whatever its batch flag).
double as_double(const Known& k, std::size_t i);
// Appends element e of `from` (float or int) to `to`.
void copy_element(const Known& from, std::size_t e, Known& to);
// A Known of `dims` whose element e is data's element source(e).
Known gather_elements(const Known& data, const std::vector<std::int64_t>& dims,
                      const std::function<std::size_t(std::int64_t)>& source);
// The axes of a Squeeze/Unsqueeze/Reduce: input `input` from opset 13, else the attribute.
Result<std::vector<std::int64_t>> axes_of(const onnx::NodeProto& node, std::int64_t opset,
                                          const std::vector<const Known*>& in, std::size_t input);
std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank);

// The layout operators. REQUIRES: in[0] is known and has no symbolic dims (evaluate() checks).
// Outputs{} for any other op.
Result<Outputs> evaluate_layout(const onnx::NodeProto& node, std::int64_t opset, const std::vector<const Known*>& in);
// Split and Trilu (onnx_consts_select.cpp). Same REQUIRES.
Result<Outputs> evaluate_select(const onnx::NodeProto& node, std::int64_t opset, const std::vector<const Known*>& in);
// ReduceProd, and ReduceSum/ReduceMax/ReduceMin of integers (onnx_consts_reduce.cpp). Same
// REQUIRES; Outputs{} for any other op or input.
Result<Outputs> evaluate_reduce(const onnx::NodeProto& node, std::int64_t opset, const std::vector<const Known*>& in);

}  // namespace psrun::onnx_io::consts_detail
