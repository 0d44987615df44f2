// The Importer (onnx_importer.h): shape arithmetic and constants are evaluated at import
// (onnx_consts.h); fused patterns become one layer (onnx_patterns.cpp); every other node goes
// to the kind that imports its op type (nn::OpSchema::import_onnx) through NodeView. The
// graph's inputs, loss, heads and initial parameters: onnx_importer_io.cpp.
#include "workerd/onnx/onnx_importer.h"

#include <algorithm>
#include <cmath>

#include "common/utf8.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/fixed_batch.h"
#include "workerd/onnx/onnx_consts_ops.h"
#include "workerd/onnx/onnx_import_advice.h"
#include "workerd/onnx/onnx_lowerings.h"
#include "workerd/onnx/onnx_node_view.h"

namespace psrun::onnx_io {

namespace {

constexpr std::size_t kEvaluationBudget = std::size_t{1} << 25;  // elements evaluated at import, in all

}  // namespace

Importer::Importer(const GraphIndex& graph, std::int64_t opset, std::string source, std::set<std::string> frozen,
                   ReadingChoices* choices)
    : graph_(graph),
      opset_(opset),
      source_(std::move(source)),
      file_batch_(fixed_batch_size(graph.graph())),
      frozen_(std::move(frozen)),
      choices_(choices) {}

std::optional<nn::Dims> Importer::fill_at_file_batch(const nn::Dims& shape) {
    if (file_batch_ > 1) return nn::fill_shape_at_fixed_batch(shape, file_batch_);
    if (file_batch_ != 1) return std::nullopt;
    const auto readings = nn::fill_readings_at_batch_one(shape);
    if (readings.empty()) return std::nullopt;
    const std::size_t pick = choose_reading(readings.size() + 1);  // 0: as written
    if (pick == 0) return std::nullopt;
    return readings[std::min(pick, readings.size()) - 1];
}

void Importer::read_fixed_batch_fill(Known& k) {
    if (k.symbolic_dims || k.size() == 0 || !k.is_float) return;
    const double first = as_double(k, 0);
    for (std::size_t e = 1; e < k.size(); ++e)
        if (as_double(k, e) != first) return;
    nn::Dims dims;
    for (const auto d : k.dims) dims.push_back(nn::Dim::of(d));
    auto at_batch = fill_at_file_batch(dims);
    if (!at_batch) return;
    Known fill;
    fill.is_float = k.is_float;
    fill.symbolic_dims = std::move(*at_batch);
    fill.fill = first;
    k = std::move(fill);
}

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
    for (int k = 2; names_.count(name) != 0 || (builder_ && builder_->taken(name)); ++k)
        name = base + "_" + std::to_string(k);
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
    if (frozen_.count(onnx_value) != 0) return "";
    return initializer_tensor(onnx_value);
}

std::string Importer::initializer_tensor(const std::string& onnx_value) {
    const auto* t = graph_.initializer(onnx_value);
    if (t == nullptr || t->data_type() != onnx::TensorProto::FLOAT) return "";
    const auto it = tensor_names_.find(onnx_value);
    if (it != tensor_names_.end()) return it->second;
    auto values = read_floats(*t);
    // A tensor holding +-Inf (a registered causal mask) cannot train: it becomes a constant.
    if (values && std::any_of(values->begin(), values->end(), [](float v) { return std::isinf(v); })) return "";
    const std::string name = unique_name(onnx_value);
    tensor_names_.emplace(onnx_value, name);
    if (values) initial_[name] = std::move(*values);
    return name;
}

Result<std::string> Importer::data_value(const std::string& onnx_value, const std::string& who) {
    const auto it = values_.find(onnx_value);
    if (it != values_.end()) return it->second;
    const auto* init = graph_.initializer(onnx_value);
    // A float initializer is a parameter; a frozen one (psrun.frozen) a frozen parameter: a state
    // tensor nothing writes, its values with the model's tensors rather than in the description.
    const bool frozen = frozen_.count(onnx_value) != 0;
    if (init != nullptr && init->data_type() == onnx::TensorProto::FLOAT && !initializer_tensor(onnx_value).empty()) {
        const std::string tensor = initializer_tensor(onnx_value);
        if (initial_.count(tensor) == 0) {
            auto values = read_floats(*init);
            if (!values) return tl::unexpected(Error{ErrorCode::kInvalidArgument, who + ": " + values.error().message});
        }
        nlohmann::json layer = {{"kind", "parameter"},
                                {"shape", std::vector<std::int64_t>(init->dims().begin(), init->dims().end())},
                                {"tensors", {{"value", tensor}}}};
        if (frozen) layer["frozen"] = true;
        PSRUN_TRY_ASSIGN(auto name, emit(layer, tensor + "_param", who));
        values_[onnx_value] = name;
        return name;
    }
    const Known* k = known(onnx_value);
    if (k == nullptr && init != nullptr) {
        auto made = known_from_tensor(*init);
        if (!made) return tl::unexpected(Error{ErrorCode::kInvalidArgument, who + ": " + made.error().message});
        known_[onnx_value] = std::move(*made);
        k = known(onnx_value);
    }
    if (k == nullptr)
        return tl::unexpected(
            Error{ErrorCode::kInvalidArgument,
                  who + ": its input '" + onnx_value + "' is not computed (its producer was not imported)"});
    if (!k->symbolic_dims && k->size() > static_cast<std::size_t>(nn::kMaxConstantValues))
        return tl::unexpected(
            Error{ErrorCode::kInvalidArgument,
                  who + ": its input '" + onnx_value + "' is a constant of " + std::to_string(k->size()) + " values (" +
                      (frozen_.count(onnx_value) != 0 ? "a frozen buffer or parameter" : "known at import") +
                      "); the engine keeps at most " + std::to_string(nn::kMaxConstantValues) +
                      " values in a constant: read only the part the graph needs (a slice of it folds at import)"});
    nlohmann::json layer = {{"kind", "constant"}, {"type", k->is_float ? "float" : "int"}};
    if (k->symbolic_dims) {
        nlohmann::json shape = nlohmann::json::array();
        for (const auto& d : *k->symbolic_dims)
            shape.push_back(d.batch ? nlohmann::json(d.to_string()) : nlohmann::json(d.value));
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
                    return tl::unexpected(
                        Error{ErrorCode::kInvalidArgument,
                              who + ": its input '" + onnx_value +
                                  "' depends on the batch size, which the engine does not compute at run time"});
                ints.push_back(d.value);
            }
            layer["values"] = ints;
        }
    }
    PSRUN_TRY_ASSIGN(auto name, emit(layer, onnx_value, who));
    values_[onnx_value] = name;
    return name;
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
        if (file_batch_ > 0) read_fixed_batch_fill(*k);
        known_[node.output(0)] = std::move(*k);
        return {};
    }
    // Evaluate at import what can be.
    std::vector<const Known*> inputs;
    const nn::ValueInfo* shape_of = nullptr;
    // A frozen float initializer becomes known (doubles) only where the node can be evaluated:
    // read by a layer instead (a frozen backbone's weight), it is read once, as its tensor.
    auto evaluable = [this](const std::string& v) {
        if (v.empty() || known(v) != nullptr) return true;
        const auto* init = graph_.initializer(v);
        return init != nullptr && (init->data_type() != onnx::TensorProto::FLOAT || frozen_.count(v) != 0);
    };
    const bool all_evaluable = std::all_of(node.input().begin(), node.input().end(), evaluable);
    for (int k = 0; k < node.input_size(); ++k) {
        const std::string& v = node.input(k);
        const Known* known_value = v.empty() ? nullptr : known(v);
        const auto* init = v.empty() ? nullptr : graph_.initializer(v);
        // Integer initializers and frozen float ones (buffers: psrun.frozen) are constants, so what
        // a node computes from them is evaluated here: pe[:L] of the PyTorch tutorial's 5000-row
        // positional table is the L rows the graph reads, not a constant of the whole table.
        if (known_value == nullptr && init != nullptr &&
            (init->data_type() != onnx::TensorProto::FLOAT || (frozen_.count(v) != 0 && all_evaluable))) {
            auto made = known_from_tensor(*init);
            if (!made) return tl::unexpected(refuse(i, made.error().message));
            known_[v] = std::move(*made);
            known_value = known(v);
        }
        inputs.push_back(known_value);
    }
    if (op == "If") return import_if(i);
    PSRUN_TRY_ASSIGN(auto sequence, import_sequence(*this, i));
    if (sequence) return {};
    if (op == "Loop") return import_loop(i);
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
    // What evaluation may cost: values computed at import, in elements, over the whole graph (a
    // file can chain large fills; past it, nodes import as layers or are refused by name).
    Result<std::optional<std::vector<Known>>> evaluated = std::optional<std::vector<Known>>{};
    // A file of fixed batch size writes torch.zeros(x.size(0), H) as a ConstantOfShape of a
    // constant: its entry of the batch's size reads as N (nn/ops/fixed_batch.h).
    Known batch_shape;
    if (op == "ConstantOfShape" && file_batch_ > 0 && !inputs.empty() && inputs[0] != nullptr && !inputs[0]->is_float &&
        !inputs[0]->symbolic_dims)
        if (auto dims = fill_at_file_batch(inputs[0]->i)) {
            batch_shape = *inputs[0];
            batch_shape.i = *dims;
            inputs[0] = &batch_shape;
        }
    if (evaluated_elements_ < kEvaluationBudget) evaluated = evaluate(node, opset_, inputs, shape_of);
    if (!evaluated) return tl::unexpected(refuse(i, evaluated.error().message));
    if (*evaluated) {
        if (op == "Div")
            if (auto w = truncating_division_warning(graph_, i, inputs))
                model_.import_warnings.push_back(std::move(*w));
        for (std::size_t k = 0; k < (*evaluated)->size() && static_cast<int>(k) < node.output_size(); ++k) {
            evaluated_elements_ += (**evaluated)[k].size();
            known_[node.output(static_cast<int>(k))] = std::move((**evaluated)[k]);
        }
        return {};
    }
    PSRUN_TRY_ASSIGN(auto pattern, import_pattern(*this, i));
    if (pattern) return {};
    PSRUN_TRY_ASSIGN(auto lowered, import_lowering(*this, i));
    if (lowered) return {};
    const nn::OpSchema* schema = nn::find_onnx_importer(op);
    if (schema == nullptr || schema->import_onnx == nullptr)
        return tl::unexpected(refuse(i, "the engine has no operator for ONNX " + op));
    NodeView view(*this, i);
    PSRUN_TRY(schema->import_onnx(view));
    for (int k = 0; k < node.output_size(); ++k) {
        const std::string& out = node.output(k);
        if (out.empty() || values_.count(out) != 0) continue;
        if (value_read(out))
            return tl::unexpected(refuse(i, "output " + std::to_string(k) + " ('" + out + "') is not supported"));
    }
    return {};
}

bool Importer::value_read(const std::string& value) const {
    const auto& outputs = graph_.outputs();
    bool read = std::find(outputs.begin(), outputs.end(), value) != outputs.end();
    for (const int r : graph_.readers(value)) read = read || graph_.needed(r);
    return read;
}

Result<ImportOutcome> Importer::run(const std::string& name, const std::string& description) {
    // Every data input, in the graph's order: the first is the primary input.
    PSRUN_TRY(add_inputs());
    // JSON holds them (checkpoint manifests, the description an export embeds).
    model_.name = valid_utf8(name);
    model_.description = valid_utf8(description);
    builder_ = std::make_unique<nn::GraphBuilder>(model_, "model " + source_);
    PSRUN_TRY(claim_rnn_weights(*this));
    PSRUN_TRY(claim_embedding_bags(*this));
    // A final Softmax or LogSoftmax is the loss's own: the output is its input (the logits). A
    // final ArgMax over the classes (a predict graph's) is what psrun predict does itself: the
    // output is its input.
    std::string output = graph_.output();
    int last = graph_.producer(output);
    const auto& nodes = graph_.graph();
    // Several outputs: a loss and its heads beside it (heads_of_outputs()); a head returned
    // through a final Softmax, LogSoftmax or Sigmoid that nothing else reads is that node's input.
    std::vector<std::string> outputs = graph_.outputs();
    if (outputs.size() > 1) {
        for (auto& o : outputs) {
            const int p = graph_.producer(o);
            if (p < 0 || graph_.readers(o).size() != 0) continue;
            const std::string& op = nodes.node(p).op_type();
            if (op == "Softmax" || op == "LogSoftmax" || op == "Sigmoid") {
                o = nodes.node(p).input(0);
                consume(p);
            }
        }
        last = -1;
    }
    if (last >= 0 && nodes.node(last).op_type() == "ArgMax") {
        const auto* axis = find_attribute(nodes.node(last), "axis");
        if (axis != nullptr && (axis->i() == 1 || axis->i() == -1)) {
            output = nodes.node(last).input(0);
            consume(last);
            last = graph_.producer(output);
        }
    }
    if (last >= 0 && (nodes.node(last).op_type() == "Softmax" || nodes.node(last).op_type() == "LogSoftmax")) {
        output = nodes.node(last).input(0);
        consume(last);
    }
    for (int i = 0; i < nodes.node_size(); ++i) {
        if (!graph_.needed(i) || consumed(i)) continue;
        node_ = i;
        if (auto done = import_node(i); !done) return tl::unexpected(blame_loop(i, done.error()));
        if (static_if_) return ImportOutcome{*static_if_};
        if (loop_unroll_) return ImportOutcome{*loop_unroll_};
    }
    node_ = -1;
    if (outputs.size() > 1) {
        PSRUN_TRY_ASSIGN(auto loss, loss_of_outputs(outputs));
        output = loss;
    }
    const auto out = values_.find(output);
    if (out == values_.end())
        return make_error(ErrorCode::kInvalidArgument,
                          "the output '" + output + "' is not computed by the imported layers");
    const nn::ValueInfo& logits = model_.value(out->second);
    model_.classes = logits.rank() == 2 ? logits.dims[1].value : 0;
    // A module that returns its own loss (a float scalar: torch.onnx's SoftmaxCrossEntropyLoss,
    // a mean of element-wise terms) is trained as it is.
    if (logits.type == nn::ElementType::kFloat && !nn::has_batch(logits.dims) &&
        nn::elements_per_example(logits.dims).value_or(0) == 1)
        model_.loss = nn::LossKind::kGraph;
    PSRUN_TRY(builder_->finish(out->second));
    PSRUN_TRY(check_heads(outputs, output));
    PSRUN_TRY(set_initial_parameters());
    return ImportOutcome{std::move(model_)};
}

}  // namespace psrun::onnx_io
