// One ONNX node as an operator kind's import sees it (nn::OnnxNodeImport, onnx_bridge.h): its
// inputs resolved through the Importer (psrun values, initializers, what is known at import),
// its attributes with errors that name the node, and the layers it emits. Lives for one
// import_node call; holds references to the Importer and the node, owns neither. Not
// thread-safe.
#pragma once

#include <string>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/onnx/onnx_importer.h"

namespace psrun::onnx_io {

class NodeView final : public nn::OnnxNodeImport {
  public:
    NodeView(Importer& importer, int index);

    std::string_view op_type() const override { return node_.op_type(); }
    std::int64_t opset() const override { return im_.opset(); }
    std::int64_t file_batch() const override { return im_.file_batch(); }
    std::size_t choose_reading(std::size_t count) override { return im_.choose_reading(count); }
    std::string node_name() const override { return name_; }
    std::size_t input_count() const override { return static_cast<std::size_t>(node_.input_size()); }
    bool has_input(std::size_t i) const override { return i < input_count() && !input(i).empty(); }
    std::size_t output_count() const override { return static_cast<std::size_t>(node_.output_size()); }
    bool output_read(std::size_t k) const override {
        return k < output_count() && !node_.output(static_cast<int>(k)).empty() &&
               im_.value_read(node_.output(static_cast<int>(k)));
    }

    Result<std::string> value(std::size_t i) override;
    const nn::ValueInfo* info(std::size_t i) const override;
    std::string initializer(std::size_t i) const override;
    std::optional<std::vector<std::int64_t>> constant_shape(std::size_t i) const override;
    std::optional<std::vector<float>> floats(std::size_t i) const override;
    std::optional<std::vector<std::int64_t>> ints(std::size_t i) const override;
    std::optional<nn::Dims> symbolic_ints(std::size_t i) const override;
    std::optional<float> fill(std::size_t i) const override;
    int element_type(std::size_t i) const override;
    const nlohmann::json* pattern(std::size_t i) const override;

    Result<std::int64_t> int_attr(const std::string& name, std::int64_t fallback) const override;
    Result<float> float_attr(const std::string& name, float fallback) const override;
    Result<std::optional<std::vector<std::int64_t>>> ints_attr(const std::string& name) const override;
    Result<std::string> string_attr(const std::string& name, const std::string& fallback) const override;
    Result<std::optional<std::vector<std::string>>> strings_attr(const std::string& name) const override;
    bool has_attr(const std::string& name) const override { return find_attribute(node_, name) != nullptr; }

    Result<std::string> emit(nlohmann::json layer) override;
    void bind_output(std::size_t k, const std::string& value) override;
    std::unique_ptr<nn::OnnxNodeImport> only_reader(std::size_t k, std::string_view op) override;
    void fold() override { im_.consume(index_); }
    Error refuse(const std::string& what) const override { return im_.refuse(index_, what); }

  private:
    const std::string& input(std::size_t i) const { return node_.input(static_cast<int>(i)); }
    std::string label() const { return node_label(node_, index_); }
    // An attribute's value, or its error as a refusal naming the node.
    template <typename T>
    Result<T> named(Result<T> v) const {
        if (!v) return tl::unexpected(refuse(v.error().message));
        return v;
    }

    Importer& im_;
    int index_;
    const onnx::NodeProto& node_;
    std::string name_;
    int emitted_ = 0;
};

}  // namespace psrun::onnx_io
