// import_onnx (onnx_model.h): the graph walked in order (onnx_importer.h). Shape arithmetic
// and constants are evaluated at import (onnx_consts.h); fused patterns become one layer
// (onnx_patterns.cpp); every other node goes to the kind that imports its op type
// (nn::OpSchema::import_onnx) through NodeView. A file psrun exported carries its own
// description (kDescriptionKey): when every tensor it names is an initializer of the same
// shape, that description (dropout, names, loss, recipe) is the result, so a round trip keeps
// the architecture hash.
#include <climits>
#include <filesystem>
#include <fstream>

#include "workerd/nn/model_summary.h"
#include "workerd/nn/op_schema.h"
#include "workerd/onnx/onnx_importer.h"

#include "common/utf8.h"
#include "workerd/onnx/onnx_model.h"

namespace psrun::onnx_io {

namespace {

// Largest file read: protobuf's own limit.
constexpr std::uintmax_t kMaxOnnxBytes = INT_MAX;

Result<std::int64_t> default_opset(const onnx::ModelProto& proto) {
    for (const auto& o : proto.opset_import()) {
        if (!o.domain().empty() && o.domain() != "ai.onnx") continue;
        if (o.version() < kMinImportOpset || o.version() > kMaxImportOpset)
            return make_error(ErrorCode::kInvalidArgument,
                              "opset " + std::to_string(o.version()) + ": the importer reads opsets " +
                                  std::to_string(kMinImportOpset) + " to " + std::to_string(kMaxImportOpset) +
                                  " (torch.onnx.export(..., opset_version=13))");
        return o.version();
    }
    return make_error(ErrorCode::kInvalidArgument, "no opset_import of the default ONNX domain");
}

// The input: float [N, ...] or int64/int32 [N, L] ids; fixed sizes past the batch dim.
Result<nn::ValueInfo> input_info(const onnx::ValueInfoProto& input) {
    const std::string where = "input '" + input.name() + "': ";
    if (!input.type().has_tensor_type())
        return make_error(ErrorCode::kInvalidArgument, where + "not a tensor");
    const auto type = input.type().tensor_type().elem_type();
    nn::ValueInfo info;
    if (type == onnx::TensorProto::INT64 || type == onnx::TensorProto::INT32) info.type = nn::ElementType::kInt;
    else if (type != onnx::TensorProto::FLOAT)
        return make_error(ErrorCode::kInvalidArgument, where + "not a float32 or int64 tensor");
    const auto& shape = input.type().tensor_type().shape();
    const int rank = shape.dim_size();
    if (rank < 2 || rank > 5)
        return make_error(ErrorCode::kInvalidArgument,
                          where + "rank " + std::to_string(rank) + ": the engine takes [N, ...] inputs of rank 2 to 5");
    info.dims.push_back(nn::Dim::batch_times(1));
    for (int i = 1; i < rank; ++i) {
        const auto& d = shape.dim(i);
        if (!d.has_dim_value() || d.dim_value() < 1 || d.dim_value() > nn::kMaxTensorElements)
            return make_error(ErrorCode::kInvalidArgument,
                              where + "dimension " + std::to_string(i) +
                                  " is not a fixed positive size (only the batch dimension may be symbolic)");
        info.dims.push_back(nn::Dim::of(d.dim_value()));
    }
    const auto elements = nn::elements_per_example(info.dims);
    if (!elements || *elements > nn::kMaxTensorElements) return make_error(ErrorCode::kInvalidArgument, where + "too large");
    return info;
}

std::string stem(std::string_view source) {
    std::string name = std::filesystem::path(std::string(source)).stem().string();
    return name.empty() ? "onnx" : name;
}

// The OnnxNodeImport of node `index`.
class NodeView final : public nn::OnnxNodeImport {
public:
    NodeView(Importer& importer, int index)
        : im_(importer), index_(index), node_(importer.graph().graph().node(index)),
          name_(importer.unique_name(node_.name().empty() ? node_.output(0) : node_.name())) {}

    std::string_view op_type() const override { return node_.op_type(); }
    std::int64_t opset() const override { return im_.opset(); }
    std::string node_name() const override { return name_; }
    std::size_t input_count() const override { return static_cast<std::size_t>(node_.input_size()); }
    bool has_input(std::size_t i) const override { return i < input_count() && !node_.input(static_cast<int>(i)).empty(); }
    std::size_t output_count() const override { return static_cast<std::size_t>(node_.output_size()); }

    Result<std::string> value(std::size_t i) override {
        if (!has_input(i)) return tl::unexpected(refuse("input " + std::to_string(i) + " is missing"));
        return im_.data_value(node_.input(static_cast<int>(i)), label());
    }
    const nn::ValueInfo* info(std::size_t i) const override {
        return has_input(i) ? im_.info(node_.input(static_cast<int>(i))) : nullptr;
    }
    std::string initializer(std::size_t i) const override {
        return has_input(i) ? im_.slot_tensor(node_.input(static_cast<int>(i))) : "";
    }
    std::optional<std::vector<std::int64_t>> constant_shape(std::size_t i) const override {
        if (!has_input(i)) return std::nullopt;
        const std::string& v = node_.input(static_cast<int>(i));
        if (const auto* t = im_.graph().initializer(v)) return std::vector<std::int64_t>(t->dims().begin(), t->dims().end());
        if (const Known* k = im_.known(v); k && !k->symbolic_dims) return k->dims;
        return std::nullopt;
    }
    std::optional<std::vector<float>> floats(std::size_t i) const override {
        if (!has_input(i)) return std::nullopt;
        const std::string& v = node_.input(static_cast<int>(i));
        if (const auto* t = im_.graph().initializer(v); t && t->data_type() == onnx::TensorProto::FLOAT) {
            auto f = read_floats(*t);
            if (f) return *f;
            return std::nullopt;
        }
        const Known* k = im_.known(v);
        if (k == nullptr || k->symbolic_dims) return std::nullopt;
        std::vector<float> out;
        for (std::size_t e = 0; e < k->size(); ++e)
            out.push_back(static_cast<float>(k->is_float ? k->f[e] : static_cast<double>(k->i[e].value)));
        if (!k->is_float)
            for (const auto& d : k->i)
                if (d.batch) return std::nullopt;
        return out;
    }
    std::optional<std::vector<std::int64_t>> ints(std::size_t i) const override {
        if (!has_input(i)) return std::nullopt;
        const std::string& v = node_.input(static_cast<int>(i));
        if (const auto* t = im_.graph().initializer(v); t && t->data_type() != onnx::TensorProto::FLOAT) {
            auto x = read_ints(*t);
            if (x) return *x;
            return std::nullopt;
        }
        const Known* k = im_.known(v);
        return k == nullptr ? std::nullopt : k->plain_ints();
    }
    std::optional<nn::Dims> symbolic_ints(std::size_t i) const override {
        if (!has_input(i)) return std::nullopt;
        const std::string& v = node_.input(static_cast<int>(i));
        if (const auto* t = im_.graph().initializer(v); t && t->data_type() != onnx::TensorProto::FLOAT) {
            auto x = read_ints(*t);
            if (!x) return std::nullopt;
            nn::Dims out;
            for (const auto d : *x) out.push_back(nn::Dim{d, false});
            return out;
        }
        const Known* k = im_.known(v);
        if (k == nullptr || k->is_float || k->symbolic_dims) return std::nullopt;
        return k->i;
    }
    std::optional<float> fill(std::size_t i) const override {
        const Known* k = has_input(i) ? im_.known(node_.input(static_cast<int>(i))) : nullptr;
        if (k == nullptr || !k->symbolic_dims) return std::nullopt;
        return static_cast<float>(k->fill);
    }
    const nlohmann::json* pattern(std::size_t i) const override {
        return has_input(i) ? im_.note(node_.input(static_cast<int>(i))) : nullptr;
    }

    Result<std::int64_t> int_attr(const std::string& name, std::int64_t fallback) const override {
        auto v = onnx_io::int_attr(node_, name, fallback);
        if (!v) return tl::unexpected(refuse(v.error().message));
        return v;
    }
    Result<float> float_attr(const std::string& name, float fallback) const override {
        auto v = onnx_io::float_attr(node_, name, fallback);
        if (!v) return tl::unexpected(refuse(v.error().message));
        return v;
    }
    Result<std::optional<std::vector<std::int64_t>>> ints_attr(const std::string& name) const override {
        auto v = onnx_io::ints_attr(node_, name);
        if (!v) return tl::unexpected(refuse(v.error().message));
        return v;
    }
    Result<std::string> string_attr(const std::string& name, const std::string& fallback) const override {
        auto v = onnx_io::string_attr(node_, name, fallback);
        if (!v) return tl::unexpected(refuse(v.error().message));
        return v;
    }
    bool has_attr(const std::string& name) const override { return find_attribute(node_, name) != nullptr; }

    Result<std::string> emit(nlohmann::json layer) override {
        std::string name = name_;
        if (layer.contains("name")) name = layer.at("name").get<std::string>();
        else if (emitted_ > 0) name = name_ + "_" + std::to_string(emitted_);
        ++emitted_;
        return im_.emit(std::move(layer), name, label());
    }
    void bind_output(std::size_t k, const std::string& value) override {
        if (k < output_count() && !node_.output(static_cast<int>(k)).empty()) im_.bind(node_.output(static_cast<int>(k)), value);
    }
    Error refuse(const std::string& what) const override { return im_.refuse(index_, what); }

private:
    std::string label() const { return node_label(node_, index_); }

    Importer& im_;
    int index_;
    const onnx::NodeProto& node_;
    std::string name_;
    int emitted_ = 0;
};

}  // namespace

Importer::Importer(const GraphIndex& graph, std::int64_t opset, std::string source)
    : graph_(graph), opset_(opset), source_(std::move(source)) {}

Error Importer::refuse(int node, const std::string& what) const {
    return Error{ErrorCode::kInvalidArgument, node_label(graph_.graph().node(node), node) + ": " + what};
}

std::string Importer::unique_name(const std::string& onnx_name) {
    std::string base;
    for (const char c : onnx_name.substr(0, 180)) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                        c == '-' || c == '.' || c == '/';
        base += ok ? c : '_';
    }
    if (base.empty()) base = "node";
    std::string name = base;
    for (int k = 2; names_.count(name) != 0 || (builder_ && builder_->taken(name)); ++k) name = base + "_" + std::to_string(k);
    names_.insert(name);
    return name;
}

const nn::ValueInfo* Importer::info(const std::string& onnx_value) const {
    const auto it = values_.find(onnx_value);
    if (it == values_.end()) return nullptr;
    const auto v = model_.values.find(it->second);
    return v == model_.values.end() ? nullptr : &v->second;
}

const Known* Importer::known(const std::string& onnx_value) const {
    const auto it = known_.find(onnx_value);
    return it == known_.end() ? nullptr : &it->second;
}

std::string Importer::slot_tensor(const std::string& onnx_value) {
    const auto* t = graph_.initializer(onnx_value);
    if (t == nullptr || t->data_type() != onnx::TensorProto::FLOAT) return "";
    const auto it = tensor_names_.find(onnx_value);
    if (it != tensor_names_.end()) return it->second;
    const std::string name = unique_name(onnx_value);
    tensor_names_.emplace(onnx_value, name);
    auto values = read_floats(*t);
    if (values) initial_[name] = std::move(*values);
    return name;
}

Result<std::string> Importer::data_value(const std::string& onnx_value, const std::string& who) {
    const auto it = values_.find(onnx_value);
    if (it != values_.end()) return it->second;
    const auto* init = graph_.initializer(onnx_value);
    if (init != nullptr && init->data_type() == onnx::TensorProto::FLOAT) {
        const std::string tensor = slot_tensor(onnx_value);
        if (initial_.count(tensor) == 0) {
            auto values = read_floats(*init);
            if (!values) return tl::unexpected(Error{ErrorCode::kInvalidArgument, who + ": " + values.error().message});
        }
        nlohmann::json layer = {{"kind", "parameter"},
                                {"shape", std::vector<std::int64_t>(init->dims().begin(), init->dims().end())},
                                {"tensors", {{"value", tensor}}}};
        auto name = emit(layer, tensor + "_param", who);
        if (!name) return tl::unexpected(name.error());
        values_[onnx_value] = *name;
        return *name;
    }
    const Known* k = known(onnx_value);
    if (k == nullptr && init != nullptr) {
        auto made = known_from_tensor(*init);
        if (!made) return tl::unexpected(Error{ErrorCode::kInvalidArgument, who + ": " + made.error().message});
        known_[onnx_value] = std::move(*made);
        k = known(onnx_value);
    }
    if (k == nullptr)
        return tl::unexpected(Error{ErrorCode::kInvalidArgument,
                                    who + ": its input '" + onnx_value + "' is not computed (its producer was not imported)"});
    nlohmann::json layer = {{"kind", "constant"}, {"type", k->is_float ? "float" : "int"}};
    if (k->symbolic_dims) {
        nlohmann::json shape = nlohmann::json::array();
        for (const auto& d : *k->symbolic_dims) shape.push_back(d.batch ? nlohmann::json(d.to_string()) : nlohmann::json(d.value));
        layer["shape"] = shape;
        layer["fill"] = k->fill;
    } else {
        layer["shape"] = k->dims;
        if (k->is_float) {
            layer["values"] = k->f;
        } else {
            std::vector<std::int64_t> ints;
            for (const auto& d : k->i) {
                if (d.batch)
                    return tl::unexpected(Error{ErrorCode::kInvalidArgument,
                                                who + ": its input '" + onnx_value +
                                                    "' depends on the batch size, which the engine does not compute at run time"});
                ints.push_back(d.value);
            }
            layer["values"] = ints;
        }
    }
    auto name = emit(layer, onnx_value, who);
    if (!name) return tl::unexpected(name.error());
    values_[onnx_value] = *name;
    return *name;
}

Result<std::string> Importer::emit(nlohmann::json layer, const std::string& name, const std::string& who) {
    const std::string unique = names_.count(name) != 0 && !builder_->taken(name) ? name : unique_name(name);
    layer["name"] = unique;
    auto node = builder_->add(layer);
    if (!node) {
        // The builder's "model F: layer i (kind "name"): " prefix names a layer the user never wrote.
        std::string message = node.error().message;
        const std::string prefix = "model " + source_ + ": layer ";
        if (message.rfind(prefix, 0) == 0) {
            const auto colon = message.find(": ", prefix.size());  // after "layer I" and " (KIND "NAME")"
            if (colon != std::string::npos) message = message.substr(colon + 2);
        }
        return tl::unexpected(Error{ErrorCode::kInvalidArgument, who + ": " + message});
    }
    return (*node)->outputs.front();
}

Result<void> Importer::import_node(int i) {
    const auto& node = graph_.graph().node(i);
    const std::string& op = node.op_type();
    if (op == "Constant") {
        auto k = known_from_tensor(find_attribute(node, "value")->t());
        if (!k) return tl::unexpected(refuse(i, k.error().message));
        known_[node.output(0)] = std::move(*k);
        return {};
    }
    // Evaluate at import what can be.
    std::vector<const Known*> inputs;
    const nn::ValueInfo* shape_of = nullptr;
    std::vector<Known> from_initializers;
    from_initializers.reserve(static_cast<std::size_t>(node.input_size()));
    for (int k = 0; k < node.input_size(); ++k) {
        const std::string& v = node.input(k);
        const Known* known_value = v.empty() ? nullptr : known(v);
        const auto* init = v.empty() ? nullptr : graph_.initializer(v);
        if (known_value == nullptr && init != nullptr && init->data_type() != onnx::TensorProto::FLOAT) {
            auto made = known_from_tensor(*init);
            if (!made) return tl::unexpected(refuse(i, made.error().message));
            known_[v] = std::move(*made);
            known_value = known(v);
        }
        inputs.push_back(known_value);
    }
    if (op == "Shape" && node.input_size() == 1) {
        shape_of = info(node.input(0));
        if (shape_of == nullptr) {
            if (const auto* init = graph_.initializer(node.input(0))) {
                Known k;
                k.dims = {init->dims_size()};
                for (const auto d : init->dims()) k.i.push_back(nn::Dim{d, false});
                known_[node.output(0)] = k;
                return {};
            }
        }
    }
    auto evaluated = evaluate(node, opset_, inputs, shape_of);
    if (!evaluated) return tl::unexpected(refuse(i, evaluated.error().message));
    if (*evaluated) {
        for (std::size_t k = 0; k < (*evaluated)->size() && static_cast<int>(k) < node.output_size(); ++k)
            known_[node.output(static_cast<int>(k))] = std::move((**evaluated)[k]);
        return {};
    }
    auto pattern = import_pattern(*this, i);
    if (!pattern) return tl::unexpected(pattern.error());
    if (*pattern) return {};
    const nn::OpSchema* schema = nn::find_onnx_importer(op);
    if (schema == nullptr || schema->import_onnx == nullptr)
        return tl::unexpected(refuse(i, "the engine has no operator for ONNX " + op));
    NodeView view(*this, i);
    if (auto ok = schema->import_onnx(view); !ok) return tl::unexpected(ok.error());
    for (int k = 0; k < node.output_size(); ++k) {
        const std::string& out = node.output(k);
        if (out.empty() || values_.count(out) != 0) continue;
        bool read = out == graph_.output();
        for (const int r : graph_.readers(out)) read = read || graph_.needed(r);
        if (read) return tl::unexpected(refuse(i, "output " + std::to_string(k) + " ('" + out + "') is not supported"));
    }
    return {};
}

Result<nn::ModelDescription> Importer::run(const std::string& name, const std::string& description) {
    auto input = input_info(graph_.input());
    if (!input) return tl::unexpected(input.error());
    // JSON holds them (checkpoint manifests, the description an export embeds).
    model_.name = valid_utf8(name);
    model_.description = valid_utf8(description);
    model_.input = *input;
    model_.input_name = unique_name(graph_.input().name());
    builder_ = std::make_unique<nn::GraphBuilder>(model_, "model " + source_);
    values_[graph_.input().name()] = model_.input_name;
    if (auto ok = claim_rnn_weights(*this); !ok) return tl::unexpected(ok.error());
    // A final Softmax or LogSoftmax is the loss's own: the output is its input (the logits).
    std::string output = graph_.output();
    const int last = graph_.producer(output);
    const auto& nodes = graph_.graph();
    if (last >= 0 && (nodes.node(last).op_type() == "Softmax" || nodes.node(last).op_type() == "LogSoftmax")) {
        output = nodes.node(last).input(0);
        consume(last);
    }
    for (int i = 0; i < nodes.node_size(); ++i) {
        if (!graph_.needed(i) || consumed(i)) continue;
        if (auto ok = import_node(i); !ok) return tl::unexpected(ok.error());
    }
    const auto out = values_.find(output);
    if (out == values_.end())
        return make_error(ErrorCode::kInvalidArgument, "the output '" + output + "' is not computed by the imported layers");
    const nn::ValueInfo& logits = model_.value(out->second);
    model_.classes = logits.rank() == 2 ? logits.dims[1].value : 0;
    if (auto ok = builder_->finish(out->second); !ok) return tl::unexpected(ok.error());
    std::vector<float> params(static_cast<std::size_t>(model_.parameter_count), 0.0f);
    for (const auto& t : model_.tensors) {
        const auto it = initial_.find(t.name);
        if (it == initial_.end())
            return make_error(ErrorCode::kInvalidArgument, "tensor " + t.name + " has no initializer to start from");
        if (static_cast<std::int64_t>(it->second.size()) != t.size)
            return make_error(ErrorCode::kInvalidArgument, "initializer '" + t.name + "' holds " +
                                                               std::to_string(it->second.size()) + " values where " +
                                                               std::to_string(t.size) + " are needed");
        std::copy(it->second.begin(), it->second.end(), params.begin() + t.offset);
    }
    model_.initial_parameters = std::make_shared<const std::vector<float>>(std::move(params));
    return std::move(model_);
}

namespace {

// A psrun export's recorded description, when every tensor it names is an initializer of the
// same shape; its initial parameters from them.
std::optional<nn::ModelDescription> recorded_description(const onnx::ModelProto& proto, const GraphIndex& graph,
                                                         std::string_view source) {
    for (const auto& meta : proto.metadata_props()) {
        if (meta.key() != kDescriptionKey) continue;
        auto model = nn::parse_model_text(meta.value(), source);
        if (!model) return std::nullopt;
        std::vector<float> params(static_cast<std::size_t>(model->parameter_count));
        for (const auto& t : model->tensors) {
            const auto* init = graph.initializer(t.name);
            if (init == nullptr || std::vector<std::int64_t>(init->dims().begin(), init->dims().end()) != t.shape)
                return std::nullopt;
            auto values = read_floats(*init);
            if (!values || static_cast<std::int64_t>(values->size()) != t.size) return std::nullopt;
            std::copy(values->begin(), values->end(), params.begin() + t.offset);
        }
        model->initial_parameters = std::make_shared<const std::vector<float>>(std::move(params));
        return std::move(*model);
    }
    return std::nullopt;
}

}  // namespace

Result<nn::ModelDescription> import_onnx(std::string_view bytes, std::string_view source_name) {
    const std::string prefix = "model " + std::string(source_name) + ": ";
    auto fail = [&prefix](const Error& e) { return make_error(ErrorCode::kInvalidArgument, prefix + e.message); };
    onnx::ModelProto proto;
    if (bytes.size() > kMaxOnnxBytes || !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
        return make_error(ErrorCode::kInvalidArgument,
                          prefix + "not an ONNX model (the protobuf does not parse: a truncated file or another format)");
    if (!proto.has_graph() || proto.graph().node_size() == 0)
        return make_error(ErrorCode::kInvalidArgument, prefix + "not an ONNX model (no graph or no nodes)");
    auto opset = default_opset(proto);
    if (!opset) return fail(opset.error());
    auto graph = GraphIndex::build(proto.graph(), *opset);
    if (!graph) return fail(graph.error());
    if (auto recorded = recorded_description(proto, *graph, source_name)) return std::move(*recorded);
    Importer importer(*graph, *opset, std::string(source_name));
    auto model = importer.run(stem(source_name),
                              "imported from ONNX (" + proto.producer_name() + " " + proto.producer_version() + ")");
    if (!model) {
        const std::string& m = model.error().message;
        if (m.rfind("model ", 0) == 0) return tl::unexpected(model.error());
        return fail(model.error());
    }
    return model;
}

Result<nn::ModelDescription> import_onnx_file(const std::string& path) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return make_error(ErrorCode::kIo, "model " + path + ": cannot open: " + ec.message());
    if (size > kMaxOnnxBytes)
        return make_error(ErrorCode::kInvalidArgument,
                          "model " + path + ": " + std::to_string(size) + " bytes, more than an ONNX file can hold (2 GiB)");
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(ErrorCode::kIo, "model " + path + ": cannot open");
    std::string bytes(static_cast<std::size_t>(size), '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (in.bad() || static_cast<std::uintmax_t>(in.gcount()) != size)
        return make_error(ErrorCode::kIo, "model " + path + ": read failed");
    return import_onnx(bytes, path);
}

}  // namespace psrun::onnx_io
