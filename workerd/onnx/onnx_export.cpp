// export_onnx (onnx_model.h): every tensor an initializer of its name, every node written by its
// kind (nn::OpSchema::export_onnx) through NodeWriter, values named as in the description (the
// input "images" for an image model), and the output: the softmax of the logits named
// "probabilities" (softmax cross-entropy), their sigmoid (sigmoid cross-entropy) or the outputs
// themselves, named "outputs" (mean squared error); a graph loss: its scalar, named "loss", and
// each head's scores beside it under the head's name.
#include <map>
#include <set>
#include <stdexcept>

#include "common/utf8.h"
#include "workerd/nn/model_summary.h"
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/onnx/onnx_graph_digest.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io {

namespace {

void set_value_info(onnx::ValueInfoProto& info, const std::string& name, const nn::ValueInfo& value) {
    info.set_name(name);
    auto* tensor = info.mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(value.type == nn::ElementType::kInt ? onnx::TensorProto::INT64 : onnx::TensorProto::FLOAT);
    auto* shape = tensor->mutable_shape();
    for (const auto& d : value.dims) {
        if (d.batch) shape->add_dim()->set_dim_param(d.value == 1 ? "N" : d.to_string());
        else shape->add_dim()->set_dim_value(d.value);
    }
}

class Writer {
  public:
    Writer(const nn::ModelDescription& model, std::span<const float> params, onnx::GraphProto& graph)
        : model_(model), params_(params), graph_(graph) {
        for (const auto& [name, info] : model.values) names_.insert(name);
    }

    const nn::ModelDescription& model() const { return model_; }
    onnx::GraphProto& graph() { return graph_; }
    std::span<const float> params() const { return params_; }
    std::string onnx_name(const std::string& value) const {
        const auto it = renamed_.find(value);
        return it == renamed_.end() ? value : it->second;
    }
    void rename(const std::string& value, const std::string& onnx) {
        renamed_[value] = onnx;
        names_.insert(onnx);
    }
    std::string fresh(const std::string& hint) {
        std::string name = hint;
        for (int k = 2; names_.count(name) != 0; ++k) name = hint + "_" + std::to_string(k);
        names_.insert(name);
        return name;
    }
    std::string shared(const std::string& key) {
        const auto it = shared_.find(key);
        return it != shared_.end() ? it->second : shared_[key] = fresh(key);
    }
    std::map<std::string, std::pair<std::vector<std::int64_t>, std::vector<float>>> replaced;
    std::int64_t opset = kExportOpset;  // raised by NodeWriter::require_opset

  private:
    const nn::ModelDescription& model_;
    std::span<const float> params_;
    onnx::GraphProto& graph_;
    std::set<std::string> names_;
    std::map<std::string, std::string> renamed_;
    std::map<std::string, std::string> shared_;  // OnnxNodeExport::shared_value
};

void set_attr(onnx::NodeProto& node, const std::string& name, const nn::OnnxAttr& value) {
    onnx::AttributeProto* a = node.add_attribute();
    a->set_name(name);
    if (const auto* i = std::get_if<std::int64_t>(&value)) {
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(*i);
    } else if (const auto* f = std::get_if<float>(&value)) {
        a->set_type(onnx::AttributeProto::FLOAT);
        a->set_f(*f);
    } else if (const auto* s = std::get_if<std::string>(&value)) {
        a->set_type(onnx::AttributeProto::STRING);
        a->set_s(*s);
    } else if (const auto* is = std::get_if<std::vector<std::int64_t>>(&value)) {
        a->set_type(onnx::AttributeProto::INTS);
        for (const auto v : *is) a->add_ints(v);
    } else if (const auto* fs = std::get_if<std::vector<float>>(&value)) {
        a->set_type(onnx::AttributeProto::FLOATS);
        for (const auto v : *fs) a->add_floats(v);
    } else if (const auto* ss = std::get_if<std::vector<std::string>>(&value)) {
        a->set_type(onnx::AttributeProto::STRINGS);
        for (const auto& v : *ss) a->add_strings(v);
    }
}

class NodeWriter final : public nn::OnnxNodeExport {
  public:
    NodeWriter(Writer& w, const nn::Node& node) : w_(w), node_(node) {}

    const nn::Node& node() const override { return node_; }
    const nn::ModelDescription& model() const override { return w_.model(); }
    std::string model_input() const override { return w_.onnx_name(w_.model().input_name()); }
    std::string input(std::size_t i) const override { return w_.onnx_name(node_.inputs.at(i)); }
    std::string output(std::size_t i) const override { return w_.onnx_name(node_.outputs.at(i)); }
    std::string fresh(const std::string& hint) override { return w_.fresh(hint); }
    std::string shared_value(const std::string& key) override { return w_.shared(key); }
    void require_opset(std::int64_t opset) override { w_.opset = std::max(w_.opset, opset); }
    void add(const std::string& op_type, const std::vector<std::string>& inputs,
             const std::vector<std::string>& outputs, const std::vector<std::pair<std::string, nn::OnnxAttr>>& attrs,
             const std::string& name) override {
        onnx::NodeProto* n = w_.graph().add_node();
        n->set_op_type(op_type);
        n->set_name(name.empty() ? w_.fresh(node_.name + "/" + op_type) : name);
        for (const auto& i : inputs) n->add_input(i);
        for (const auto& o : outputs) n->add_output(o);
        for (const auto& [key, value] : attrs) set_attr(*n, key, value);
    }
    void constant_node(const std::string& output, const std::vector<std::int64_t>& dims, std::span<const float> values,
                       const std::string& name) override {
        onnx::NodeProto* n = w_.graph().add_node();
        n->set_op_type("Constant");
        n->set_name(name.empty() ? w_.fresh(node_.name + "/Constant") : name);
        n->add_output(output);
        onnx::AttributeProto* a = n->add_attribute();
        a->set_name("value");
        a->set_type(onnx::AttributeProto::TENSOR);
        onnx::TensorProto* t = a->mutable_t();
        t->set_data_type(onnx::TensorProto::FLOAT);
        for (const auto d : dims) t->add_dims(d);
        t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    }
    std::string int64_constant(const std::string& hint, const std::vector<std::int64_t>& values) override {
        const std::string name = w_.fresh(hint);
        onnx::TensorProto* t = w_.graph().add_initializer();
        t->set_name(name);
        t->set_data_type(onnx::TensorProto::INT64);
        t->add_dims(static_cast<std::int64_t>(values.size()));
        for (const auto v : values) t->add_int64_data(v);
        return name;
    }
    std::string int8_constant(const std::string& hint, const std::vector<std::int64_t>& dims,
                              const std::vector<std::int64_t>& values, bool is_signed) override {
        const std::string name = w_.fresh(hint);
        onnx::TensorProto* t = w_.graph().add_initializer();
        t->set_name(name);
        t->set_data_type(is_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
        for (const auto d : dims) t->add_dims(d);
        std::string bytes;
        for (const auto v : values) bytes.push_back(static_cast<char>(v));
        t->set_raw_data(bytes);
        return name;
    }
    std::string float_constant(const std::string& hint, const std::vector<std::int64_t>& dims,
                               std::span<const float> values) override {
        const std::string name = w_.fresh(hint);
        add_float_tensor(w_.graph(), name, dims, values);
        return name;
    }
    std::span<const float> tensor_values(const std::string& name) const override {
        const nn::TensorDef* t = w_.model().tensor(name);
        if (t == nullptr) throw std::logic_error("export: no tensor " + name);
        return w_.params().subspan(static_cast<std::size_t>(t->offset), static_cast<std::size_t>(t->size));
    }
    void replace_initializer(const std::string& name, const std::vector<std::int64_t>& dims,
                             std::vector<float> values) override {
        w_.replaced[name] = {dims, std::move(values)};
    }

  private:
    Writer& w_;
    const nn::Node& node_;
};

}  // namespace

Result<std::string> export_onnx(const nn::ModelDescription& model, std::span<const float> params,
                                const std::vector<std::pair<std::string, std::string>>& metadata) {
    if (params.size() != static_cast<std::size_t>(model.parameter_count))
        return make_error(ErrorCode::kInvalidArgument, "export: " + std::to_string(params.size()) +
                                                           " parameters for model " + model.name + " of " +
                                                           std::to_string(model.parameter_count));
    onnx::ModelProto proto;
    proto.set_ir_version(onnx::IR_VERSION_2020_5_8);  // 7: what opset 13 came with
    proto.set_producer_name("psrun");
    proto.set_model_version(1);
    proto.set_doc_string(model.description);
    auto* opset = proto.add_opset_import();
    opset->set_domain("");
    opset->set_version(kExportOpset);
    auto* meta = proto.add_metadata_props();
    meta->set_key(kDescriptionKey);
    meta->set_value(json_text(nn::model_json(model)));
    // Frozen parameters stay frozen for an importer that reads the graph rather than the
    // description (an edited file): their tensors, initializers of the same name, in kFrozenKey.
    nlohmann::json frozen = nlohmann::json::array();
    for (const auto& node : model.nodes)
        if (node.op == "parameter" && node.attrs.value("frozen", false))
            for (const auto& t : model.tensors)
                if (t.owner == node.name) frozen.push_back(t.name);
    if (!frozen.empty()) {
        auto* list = proto.add_metadata_props();
        list->set_key(kFrozenKey);
        list->set_value(frozen.dump());
    }
    for (const auto& [key, value] : metadata) {
        auto* extra = proto.add_metadata_props();
        extra->set_key(key);
        extra->set_value(value);
    }

    onnx::GraphProto& graph = *proto.mutable_graph();
    graph.set_name(model.name.empty() ? "psrun" : model.name);
    Writer writer(model, params, graph);
    // A single-input image model's input is called "images" in every export (psrun predict and
    // the docs' OpenCV examples feed that name); the value already named so keeps it. Several
    // inputs keep their names, in the model's order, so a runtime feeds each by name.
    const bool rename = !model.multi_input() && model.image_input() && model.input_name() != "images";
    if (rename) {
        const std::string input = writer.fresh("images");
        writer.rename(model.input_name(), input);
        set_value_info(*graph.add_input(), input, model.input());
    } else {
        for (const auto& in : model.inputs) set_value_info(*graph.add_input(), in.name, in.info);
    }
    for (const auto& node : model.nodes) {
        const nn::OpSchema* schema = nn::find_op(node.op);
        if (schema == nullptr || schema->export_onnx == nullptr)
            return make_error(ErrorCode::kUnsupported,
                              "export: layer " + node.name + " (" + node.op + ") has no ONNX form");
        NodeWriter view(writer, node);
        if (auto ok = schema->export_onnx(view); !ok)
            return make_error(ErrorCode::kUnsupported, "export: layer " + node.name + ": " + ok.error().message);
    }
    for (const auto& t : model.tensors) {
        const auto it = writer.replaced.find(t.name);
        if (it != writer.replaced.end()) add_float_tensor(graph, t.name, it->second.first, it->second.second);
        else
            add_float_tensor(graph, t.name, t.shape,
                             params.subspan(static_cast<std::size_t>(t.offset), static_cast<std::size_t>(t.size)));
    }
    const std::string logits = writer.onnx_name(model.output);
    const nn::ValueInfo& out = model.value(model.output);
    // A graph loss whose scalar is already named "loss" (an import of torch.onnx's output) is the
    // output as it is.
    const bool named_loss = model.loss == nn::LossKind::kGraph && logits == "loss";
    onnx::NodeProto* last = named_loss ? nullptr : graph.add_node();
    if (last != nullptr) last->add_input(logits);
    if (named_loss) {
    } else if (model.loss == nn::LossKind::kSoftmaxCrossEntropy) {
        last->set_op_type("Softmax");
        last->set_name(writer.fresh("softmax"));
        last->add_output(writer.fresh("probabilities"));
        set_int(*last, "axis", 1);
    } else if (model.loss == nn::LossKind::kSigmoidCrossEntropy) {
        last->set_op_type("Sigmoid");
        last->set_name(writer.fresh("sigmoid"));
        last->add_output(writer.fresh("probabilities"));
    } else {
        // Regression outputs, or a graph's own loss (a scalar, as torch.onnx exports a module
        // that returns its loss).
        const bool graph_loss = model.loss == nn::LossKind::kGraph;
        last->set_op_type("Identity");
        last->set_name(writer.fresh(graph_loss ? "loss_output" : "output"));
        last->add_output(writer.fresh(graph_loss ? "loss" : "outputs"));
    }
    set_value_info(*graph.add_output(), named_loss ? logits : last->output(0), out);
    // A graph loss's heads are outputs beside the loss, their scores under their own names (as
    // torch.onnx writes a module returning (loss, logits, ...)); importing the file pairs them
    // with their targets again.
    if (model.loss == nn::LossKind::kGraph)
        for (const auto& h : model.heads)
            set_value_info(*graph.add_output(), writer.onnx_name(h.value), model.value(h.value));

    // A kind whose ONNX form came later (GridSample) raises the declared opset, and the IR
    // version with it (opset 16 came with IR 8).
    opset->set_version(writer.opset);
    if (writer.opset >= 16) proto.set_ir_version(8);  // IR 8: what opset 16 came with

    // The description is trusted on import only for this graph (onnx_graph_digest.h).
    std::set<std::string> parameters;
    for (const auto& t : model.tensors) parameters.insert(t.name);
    auto* digest = proto.add_metadata_props();
    digest->set_key(kGraphDigestKey);
    digest->set_value(graph_digest(graph, parameters));

    std::string bytes;
    if (!proto.SerializeToString(&bytes))
        return make_error(ErrorCode::kInvalidArgument,
                          "export: model " + model.name + " does not serialize (over 2 GiB?)");
    return bytes;
}

}  // namespace psrun::onnx_io
