// ONNX's protobuf schema as Debian ships it (libonnx-dev: only the ONNX-ML flavour of the
// generated code, namespace onnx), and the small helpers the exporter and importer share:
// reading and writing float tensors and attributes, and the column order of a dense layer's
// weights after an image (TF's HWC flattening in psrun, ONNX Flatten's CHW).
#pragma once

#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#ifndef ONNX_NAMESPACE
#define ONNX_NAMESPACE onnx
#endif
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/nn/shape.h"

namespace psrun::onnx_io {

// The opset the exporter writes and the range the importer reads: what PyTorch's exporter
// writes (Debian's torch 1.13: 14 by default, up to 17; current torch: 17-18). Each kind's import
// reads its operator's form at the model's opset (OnnxNodeImport::opset()).
inline constexpr std::int64_t kExportOpset = 13;
inline constexpr std::int64_t kMinImportOpset = 11;
inline constexpr std::int64_t kMaxImportOpset = 18;
// The metadata key under which an export keeps its psrun description (nn::model_json): what the
// graph cannot say (initializers, dropout, layer names, loss, recipe) survives a round trip.
inline constexpr const char* kDescriptionKey = "psrun.model";

// A float tensor's values (float_data or little-endian raw_data). Errors name the tensor and
// say what is wrong (not float, external data, size does not match its dims, NaN); +-Inf is kept.
Result<std::vector<float>> read_floats(const onnx::TensorProto& tensor);
// An int64 tensor's values (int64_data or raw_data): Reshape's shape.
Result<std::vector<std::int64_t>> read_int64s(const onnx::TensorProto& tensor);
// An integer tensor's values (INT64, INT32 or BOOL) as int64.
Result<std::vector<std::int64_t>> read_ints(const onnx::TensorProto& tensor);
// The product of the dims (nullopt when negative or beyond kMaxTensorElements).
std::optional<std::int64_t> element_count(const onnx::TensorProto& tensor);

// Attribute lookups by name (nullptr when absent).
const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, const std::string& name);

// "[1, 2, 3]" for messages.
std::string ints_text(const std::vector<std::int64_t>& values);

// Typed attribute reads: the attribute's value or `fallback` when absent; a wrong type is an
// error ("attribute NAME is not an int").
Result<std::int64_t> int_attr(const onnx::NodeProto& node, const std::string& name, std::int64_t fallback);
Result<float> float_attr(const onnx::NodeProto& node, const std::string& name, float fallback);
Result<std::optional<std::vector<std::int64_t>>> ints_attr(const onnx::NodeProto& node, const std::string& name);
Result<std::string> string_attr(const onnx::NodeProto& node, const std::string& name, const std::string& fallback);
Result<std::optional<std::vector<std::string>>> strings_attr(const onnx::NodeProto& node, const std::string& name);

// Builders for the exporter.
void add_float_tensor(onnx::GraphProto& graph, const std::string& name, const std::vector<std::int64_t>& dims,
                      std::span<const float> values);
void set_ints(onnx::NodeProto& node, const std::string& name, const std::vector<std::int64_t>& values);
void set_int(onnx::NodeProto& node, const std::string& name, std::int64_t value);
void set_float(onnx::NodeProto& node, const std::string& name, float value);

}  // namespace psrun::onnx_io
