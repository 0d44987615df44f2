#include "workerd/onnx/onnx_node_view.h"

#include <memory>

#include "workerd/onnx/pattern_matcher.h"

namespace psrun::onnx_io {

namespace {

// The name a node's layers get: its own, else its first output's (a node without either is
// "node"); in a graph of several outputs (a loss and its heads), a node whose first output is a
// graph output is named after that output, so a head keeps the name the module returned it by.
std::string base_name(const onnx::NodeProto& node, const GraphIndex& graph) {
    if (graph.outputs().size() > 1 && node.output_size() > 0) {
        for (const auto& o : graph.outputs())
            if (o == node.output(0)) return o;
    }
    if (!node.name().empty()) return node.name();
    return node.output_size() > 0 ? node.output(0) : "";
}

}  // namespace

NodeView::NodeView(Importer& importer, int index)
    : im_(importer),
      index_(index),
      node_(importer.graph().graph().node(index)),
      name_(importer.unique_name(base_name(node_, importer.graph()))) {}

Result<std::string> NodeView::value(std::size_t i) {
    if (!has_input(i)) return tl::unexpected(refuse("input " + std::to_string(i) + " is missing"));
    return im_.data_value(input(i), label());
}

const nn::ValueInfo* NodeView::info(std::size_t i) const { return has_input(i) ? im_.info(input(i)) : nullptr; }

std::string NodeView::initializer(std::size_t i) const { return has_input(i) ? im_.slot_tensor(input(i)) : ""; }

std::optional<std::vector<std::int64_t>> NodeView::constant_shape(std::size_t i) const {
    if (!has_input(i)) return std::nullopt;
    if (const auto* t = im_.graph().initializer(input(i)))
        return std::vector<std::int64_t>(t->dims().begin(), t->dims().end());
    if (const Known* k = im_.known(input(i)); k && !k->symbolic_dims) return k->dims;
    return std::nullopt;
}

std::optional<std::vector<float>> NodeView::floats(std::size_t i) const {
    if (!has_input(i)) return std::nullopt;
    if (const auto* t = im_.graph().initializer(input(i)); t && t->data_type() == onnx::TensorProto::FLOAT) {
        auto f = read_floats(*t);
        if (f) return *f;
        return std::nullopt;
    }
    const Known* k = im_.known(input(i));
    if (k == nullptr || k->symbolic_dims) return std::nullopt;
    if (!k->is_float)
        for (const auto& d : k->i)
            if (d.batch) return std::nullopt;
    std::vector<float> out;
    for (std::size_t e = 0; e < k->size(); ++e)
        out.push_back(static_cast<float>(k->is_float ? k->f[e] : static_cast<double>(k->i[e].value)));
    return out;
}

std::optional<std::vector<std::int64_t>> NodeView::ints(std::size_t i) const {
    if (!has_input(i)) return std::nullopt;
    if (const auto* t = im_.graph().initializer(input(i)); t && t->data_type() != onnx::TensorProto::FLOAT) {
        auto x = read_ints(*t);
        if (x) return *x;
        return std::nullopt;
    }
    if (const Known* k = im_.known(input(i))) return k->plain_ints();
    // A Constant node later in the graph, not walked yet (the bound of a reader folded in).
    const auto* t = im_.graph().constant(input(i));
    if (t == nullptr) return std::nullopt;
    const auto k = known_from_tensor(*t);
    return k ? k->plain_ints() : std::nullopt;
}

std::optional<nn::Dims> NodeView::symbolic_ints(std::size_t i) const {
    if (!has_input(i)) return std::nullopt;
    if (const auto* t = im_.graph().initializer(input(i)); t && t->data_type() != onnx::TensorProto::FLOAT) {
        auto x = read_ints(*t);
        if (!x) return std::nullopt;
        nn::Dims out;
        for (const auto d : *x) out.push_back(nn::Dim{d, false});
        return out;
    }
    const Known* k = im_.known(input(i));
    if (k == nullptr || k->is_float || k->symbolic_dims) return std::nullopt;
    return k->i;
}

int NodeView::element_type(std::size_t i) const {
    if (!has_input(i)) return 0;
    if (const auto* t = im_.graph().initializer(input(i))) return t->data_type();
    const Known* k = im_.known(input(i));
    return k == nullptr ? 0 : k->onnx_type;
}

std::optional<float> NodeView::fill(std::size_t i) const {
    const Known* k = has_input(i) ? im_.known(input(i)) : nullptr;
    if (k == nullptr || !k->symbolic_dims) return std::nullopt;
    return static_cast<float>(k->fill);
}

const nlohmann::json* NodeView::pattern(std::size_t i) const { return has_input(i) ? im_.note(input(i)) : nullptr; }

Result<std::int64_t> NodeView::int_attr(const std::string& name, std::int64_t fallback) const {
    return named(onnx_io::int_attr(node_, name, fallback));
}

Result<float> NodeView::float_attr(const std::string& name, float fallback) const {
    return named(onnx_io::float_attr(node_, name, fallback));
}

Result<std::optional<std::vector<std::int64_t>>> NodeView::ints_attr(const std::string& name) const {
    return named(onnx_io::ints_attr(node_, name));
}

Result<std::string> NodeView::string_attr(const std::string& name, const std::string& fallback) const {
    return named(onnx_io::string_attr(node_, name, fallback));
}

Result<std::optional<std::vector<std::string>>> NodeView::strings_attr(const std::string& name) const {
    return named(onnx_io::strings_attr(node_, name));
}

Result<std::string> NodeView::emit(nlohmann::json layer) {
    std::string name = name_;
    if (layer.contains("name")) name = layer.at("name").get<std::string>();
    else if (emitted_ > 0) name = name_ + "_" + std::to_string(emitted_);
    ++emitted_;
    return im_.emit(std::move(layer), name, label());
}

void NodeView::bind_output(std::size_t k, const std::string& value) {
    if (k < output_count() && !node_.output(static_cast<int>(k)).empty())
        im_.bind(node_.output(static_cast<int>(k)), value);
}

std::unique_ptr<nn::OnnxNodeImport> NodeView::only_reader(std::size_t k, std::string_view op) {
    if (k >= output_count() || node_.output(static_cast<int>(k)).empty()) return nullptr;
    const int reader = PatternMatcher(im_).only_reader(node_.output(static_cast<int>(k)), std::string(op));
    if (reader < 0 || im_.consumed(reader)) return nullptr;
    return std::make_unique<NodeView>(im_, reader);
}

}  // namespace psrun::onnx_io
