#include "workerd/onnx/onnx_proto.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace psrun::onnx_io {

namespace {

static_assert(std::endian::native == std::endian::little, "raw_data is little-endian");

Error tensor_error(const onnx::TensorProto& tensor, const std::string& what) {
    return Error{ErrorCode::kInvalidArgument, "initializer '" + tensor.name() + "': " + what};
}

// Values from raw_data or the typed field, `count` of them.
template <class T, class Field>
Result<std::vector<T>> read_values(const onnx::TensorProto& tensor, const Field& typed, const char* type_name) {
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL || tensor.external_data_size() > 0)
        return tl::unexpected(tensor_error(tensor, "data in an external file: save the model as one file"));
    const auto count = element_count(tensor);
    if (!count) return tl::unexpected(tensor_error(tensor, "bad or too large dims"));
    const auto n = static_cast<std::size_t>(*count);
    std::vector<T> values;
    if (tensor.has_raw_data()) {
        if (tensor.raw_data().size() != n * sizeof(T))
            return tl::unexpected(tensor_error(tensor, "raw_data holds " + std::to_string(tensor.raw_data().size()) +
                                                           " bytes for " + std::to_string(n) + " " + type_name +
                                                           " values"));
        values.resize(n);
        if (n > 0) std::memcpy(values.data(), tensor.raw_data().data(), n * sizeof(T));
    } else {
        if (static_cast<std::size_t>(typed.size()) != n)
            return tl::unexpected(tensor_error(
                tensor, "holds " + std::to_string(typed.size()) + " values, its dims say " + std::to_string(n)));
        values.assign(typed.begin(), typed.end());
    }
    return values;
}

}  // namespace

std::optional<std::int64_t> element_count(const onnx::TensorProto& tensor) {
    std::int64_t n = 1;
    for (const auto d : tensor.dims()) {
        if (d < 0) return std::nullopt;
        if (d == 0) return 0;
        if (n > nn::kMaxTensorElements / d) return std::nullopt;
        n *= d;
    }
    return n;
}

Result<std::vector<float>> read_floats(const onnx::TensorProto& tensor) {
    if (tensor.data_type() != onnx::TensorProto::FLOAT)
        return tl::unexpected(tensor_error(tensor, "element type " + std::to_string(tensor.data_type()) +
                                                       " is not float32 (1): export the model in float32"));
    auto values = read_values<float>(tensor, tensor.float_data(), "float");
    if (!values) return values;
    // +-Inf is legal (a causal mask is triu(full(-inf))); the importer keeps a tensor holding it
    // out of training (onnx_importer.cpp). NaN is never meant.
    for (const float v : *values)
        if (std::isnan(v)) return tl::unexpected(tensor_error(tensor, "holds NaN"));
    return values;
}

Result<std::vector<std::int64_t>> read_int64s(const onnx::TensorProto& tensor) {
    if (tensor.data_type() != onnx::TensorProto::INT64)
        return tl::unexpected(
            tensor_error(tensor, "element type " + std::to_string(tensor.data_type()) + " is not int64 (7)"));
    return read_values<std::int64_t>(tensor, tensor.int64_data(), "int64");
}

Result<std::vector<std::int64_t>> read_ints(const onnx::TensorProto& tensor) {
    if (tensor.data_type() == onnx::TensorProto::INT64) return read_int64s(tensor);
    if (tensor.data_type() == onnx::TensorProto::INT32) {
        PSRUN_TRY_ASSIGN(auto v, read_values<std::int32_t>(tensor, tensor.int32_data(), "int32"));
        return std::vector<std::int64_t>(v.begin(), v.end());
    }
    // 8-bit integers (a QuantizeLinear's zero point): raw bytes, or int32_data.
    if (tensor.data_type() == onnx::TensorProto::UINT8) {
        PSRUN_TRY_ASSIGN(auto v, read_values<std::uint8_t>(tensor, tensor.int32_data(), "uint8"));
        return std::vector<std::int64_t>(v.begin(), v.end());
    }
    if (tensor.data_type() == onnx::TensorProto::INT8) {
        PSRUN_TRY_ASSIGN(auto v, read_values<std::int8_t>(tensor, tensor.int32_data(), "int8"));
        return std::vector<std::int64_t>(v.begin(), v.end());
    }
    if (tensor.data_type() == onnx::TensorProto::BOOL) {
        const auto count = element_count(tensor);
        if (!count) return tl::unexpected(tensor_error(tensor, "bad or too large dims"));
        std::vector<std::int64_t> out;
        if (tensor.has_raw_data()) {
            if (tensor.raw_data().size() != static_cast<std::size_t>(*count))
                return tl::unexpected(tensor_error(tensor, "raw_data does not match its dims"));
            for (const char b : tensor.raw_data()) out.push_back(b != 0);
        } else {
            if (tensor.int32_data_size() != *count)
                return tl::unexpected(tensor_error(tensor, "data does not match its dims"));
            for (const auto b : tensor.int32_data()) out.push_back(b != 0);
        }
        return out;
    }
    return tl::unexpected(
        tensor_error(tensor, "element type " + std::to_string(tensor.data_type()) + " is not an integer type"));
}

const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, const std::string& name) {
    for (const auto& a : node.attribute())
        if (a.name() == name) return &a;
    return nullptr;
}

std::string ints_text(const std::vector<std::int64_t>& values) {
    std::string s = "[";
    for (std::size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
    return s + "]";
}

Result<std::int64_t> int_attr(const onnx::NodeProto& node, const std::string& name, std::int64_t fallback) {
    const auto* a = find_attribute(node, name);
    if (a == nullptr) return fallback;
    if (a->type() != onnx::AttributeProto::INT)
        return make_error(ErrorCode::kInvalidArgument, "attribute " + name + " is not an int");
    return a->i();
}
Result<float> float_attr(const onnx::NodeProto& node, const std::string& name, float fallback) {
    const auto* a = find_attribute(node, name);
    if (a == nullptr) return fallback;
    if (a->type() != onnx::AttributeProto::FLOAT)
        return make_error(ErrorCode::kInvalidArgument, "attribute " + name + " is not a float");
    return a->f();
}
Result<std::optional<std::vector<std::int64_t>>> ints_attr(const onnx::NodeProto& node, const std::string& name) {
    const auto* a = find_attribute(node, name);
    if (a == nullptr) return std::optional<std::vector<std::int64_t>>{};
    if (a->type() != onnx::AttributeProto::INTS)
        return make_error(ErrorCode::kInvalidArgument, "attribute " + name + " is not a list of ints");
    return std::optional<std::vector<std::int64_t>>(std::vector<std::int64_t>(a->ints().begin(), a->ints().end()));
}
Result<std::string> string_attr(const onnx::NodeProto& node, const std::string& name, const std::string& fallback) {
    const auto* a = find_attribute(node, name);
    if (a == nullptr) return fallback;
    if (a->type() != onnx::AttributeProto::STRING)
        return make_error(ErrorCode::kInvalidArgument, "attribute " + name + " is not a string");
    return a->s();
}
Result<std::optional<std::vector<std::string>>> strings_attr(const onnx::NodeProto& node, const std::string& name) {
    const auto* a = find_attribute(node, name);
    if (a == nullptr) return std::optional<std::vector<std::string>>{};
    if (a->type() != onnx::AttributeProto::STRINGS)
        return make_error(ErrorCode::kInvalidArgument, "attribute " + name + " is not a list of strings");
    return std::optional<std::vector<std::string>>(std::vector<std::string>(a->strings().begin(), a->strings().end()));
}

void add_float_tensor(onnx::GraphProto& graph, const std::string& name, const std::vector<std::int64_t>& dims,
                      std::span<const float> values) {
    onnx::TensorProto* t = graph.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (const auto d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
}

void set_ints(onnx::NodeProto& node, const std::string& name, const std::vector<std::int64_t>& values) {
    onnx::AttributeProto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (const auto v : values) a->add_ints(v);
}

void set_int(onnx::NodeProto& node, const std::string& name, std::int64_t value) {
    onnx::AttributeProto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
}

void set_float(onnx::NodeProto& node, const std::string& name, float value) {
    onnx::AttributeProto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(value);
}

}  // namespace psrun::onnx_io
