#include "workerd/nn/model_summary.h"

#include <openssl/evp.h>

#include <array>
#include <cstdio>

#include "workerd/nn/ops/conv.h"
#include "workerd/nn/ops/pool.h"

namespace psrun::nn {

namespace {

bool legacy_image_input(const ModelDescription& model) {
    return model.image_input().has_value() && model.input_name() == "input";
}

std::vector<std::int64_t> example_shape(const Dims& dims) {
    std::vector<std::int64_t> out;
    const bool leading = !dims.empty() && dims[0] == Dim::batch_times(1);
    for (std::size_t i = leading ? 1 : 0; i < dims.size(); ++i) out.push_back(dims[i].value);
    return out;
}

// A single-input model's "input" object, exactly as format 1 wrote it (its hash unchanged).
nlohmann::json input_json(const ModelDescription& model) {
    const ValueInfo& in = model.input();
    if (legacy_image_input(model))
        return {{"channels", in.dims[1].value}, {"height", in.dims[2].value}, {"width", in.dims[3].value}};
    nlohmann::json out = {{"shape", example_shape(in.dims)}, {"type", to_string(in.type)}};
    if (model.input_name() != "input") out["name"] = model.input_name();
    return out;
}

// A multi-input model's "inputs": every input as {"name", "dims", "type"}, in order.
nlohmann::json inputs_json(const ModelDescription& model) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& input : model.inputs)
        out.push_back(
            {{"name", input.name}, {"dims", example_shape(input.info.dims)}, {"type", to_string(input.info.type)}});
    return out;
}

// The node as a description layer: kind, name, options; inputs and tensors where not default.
nlohmann::json layer_json(const ModelDescription& model, std::size_t index) {
    const Node& node = model.nodes[index];
    nlohmann::json entry = node.attrs;
    entry["kind"] = node.op;
    entry["name"] = node.name;
    const std::string previous = index == 0 ? model.input_name() : model.nodes[index - 1].outputs.front();
    if (node.data_inputs > 0 && !(node.data_inputs == 1 && node.inputs[0] == previous))
        entry["inputs"] = std::vector<std::string>(node.inputs.begin(),
                                                   node.inputs.begin() + static_cast<std::ptrdiff_t>(node.data_inputs));
    nlohmann::json tensors = nlohmann::json::object();
    for (std::size_t s = 0; s < node.slots.size(); ++s) {
        const std::string& bound = node.inputs[node.data_inputs + s];
        if (bound != node.name + "/" + node.slots[s]) tensors[node.slots[s]] = bound;
    }
    if (!tensors.empty()) entry["tensors"] = tensors;
    return entry;
}

nlohmann::json loss_json(const ModelDescription& model) {
    if (model.loss == LossKind::kGraph) {
        nlohmann::json out = {{"kind", to_string(model.loss)}};
        if (model.label_input >= 0) out["labels"] = model.inputs[static_cast<std::size_t>(model.label_input)].name;
        if (model.heads_given) {  // found heads are found again: only named ones are part of the form
            nlohmann::json heads = nlohmann::json::array();
            for (const auto& h : model.heads)
                heads.push_back({{"output", h.value}, {"kind", to_string(h.kind)}, {"targets", h.target}});
            out["heads"] = std::move(heads);
        }
        return out;
    }
    return {{"kind", to_string(model.loss)}, {"reduction", to_string(model.reduction)}};
}

}  // namespace

std::string shape_text(const Dims& dims) {
    const bool leading = !dims.empty() && dims[0] == Dim::batch_times(1);
    if (!leading || has_batch(Dims(dims.begin() + 1, dims.end()))) {
        std::string out;
        for (const auto& d : dims) {
            if (!out.empty()) out += "x";
            out += d.to_string();
        }
        return out.empty() ? "scalar" : out;
    }
    std::string out;
    for (std::size_t i = 1; i < dims.size(); ++i) {
        if (i > 1) out += "x";
        out += std::to_string(dims[i].value);
    }
    return out.empty() ? "scalar per example" : out;  // [N]: one value per example (JSON "dims": [])
}

std::vector<TensorEntry> parameter_tensors(const ModelDescription& model) {
    std::vector<TensorEntry> out;
    for (const auto& t : model.tensors) out.push_back(TensorEntry{t.name, t.shape, t.offset, t.size, t.cls});
    return out;
}

nlohmann::json canonical_architecture(const ModelDescription& model) {
    nlohmann::json layers = nlohmann::json::array();
    for (std::size_t i = 0; i < model.nodes.size(); ++i) layers.push_back(layer_json(model, i));
    nlohmann::json out = {{"format", 1}, {"loss", loss_json(model)}, {"layers", std::move(layers)}};
    if (model.multi_input()) out["inputs"] = inputs_json(model);
    else out["input"] = input_json(model);
    if (model.loss == LossKind::kGraph) {
    }  // the graph's own shapes say it
    else if (model.classification())
        out["classes"] = model.classes;
    else out["targets"] = model.classes;
    if (model.output != model.nodes.back().outputs.front()) out["output"] = model.output;
    return out;
}

nlohmann::json model_json(const ModelDescription& model) {
    nlohmann::json out = canonical_architecture(model);
    out["name"] = model.name;
    if (!model.description.empty()) out["description"] = model.description;
    if (model.recipe) out["recipe"] = to_json(*model.recipe);
    return out;
}

std::string architecture_hash(const ModelDescription& model) {
    const std::string text = canonical_architecture(model).dump();
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int length = 0;
    EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha256(), nullptr);
    std::string hex;
    for (unsigned int i = 0; i < length; ++i) {
        char byte[3];
        std::snprintf(byte, sizeof byte, "%02x", digest[i]);
        hex += byte;
    }
    return hex;
}

nlohmann::json summary_json(const ModelDescription& model) {
    nlohmann::json layers = nlohmann::json::array();
    for (std::size_t i = 0; i < model.nodes.size(); ++i) {
        const Node& node = model.nodes[i];
        nlohmann::json tensors = nlohmann::json::array();
        for (const auto& t : model.tensors) {
            if (t.owner != node.name) continue;
            tensors.push_back({{"name", t.name},
                               {"shape", t.shape},
                               {"size", t.size},
                               {"init", to_json(t.init)},
                               {"class", to_string(t.cls)}});
        }
        nlohmann::json inputs = nlohmann::json::array();
        for (const auto& v : node.inputs) inputs.push_back(v);
        static const ValueInfo kNoInput;  // a constant reads nothing
        const ValueInfo& in = node.inputs.empty() ? kNoInput : model.value(node.inputs.front());
        nlohmann::json entry = {{"index", i},
                                {"name", node.name},
                                {"kind", node.op},
                                {"options", node.attrs},
                                {"inputs", inputs},
                                {"input_shape", example_shape(in.dims)},
                                {"output_shape", example_shape(node.output_info.front().dims)},
                                {"output_dims", to_string(node.output_info.front().dims)},
                                {"parameters", node.param_count},
                                {"tensors", std::move(tensors)},
                                {"mflop", node.flops / 1e6}};
        if (node.outputs.size() > 1) {
            nlohmann::json outputs = nlohmann::json::array();
            for (std::size_t k = 0; k < node.outputs.size(); ++k)
                outputs.push_back({{"name", node.outputs[k]}, {"dims", to_string(node.output_info[k].dims)}});
            entry["outputs"] = outputs;
        }
        std::optional<Window2d> window;
        if (node.op == "conv2d") {
            if (auto g = conv_geometry(node.attrs, in)) window = g->window;
        } else if (node.op == "max_pool" || node.op == "avg_pool") {
            if (auto g = pool_geometry(node, in)) window = g->window;
        }
        if (window) {
            entry["pads"] = {{"top", window->pt}, {"bottom", window->pb}, {"left", window->pl}, {"right", window->pr}};
            if (in.rank() == 5) entry["pads"].update({{"front", window->pf}, {"back", window->pk}});  // 3-D
        }
        layers.push_back(std::move(entry));
    }
    std::int64_t state = 0;
    for (const auto& t : model.tensors)
        if (t.cls == TensorClass::kState) state += t.size;
    nlohmann::json out = {
        {"name", model.name},
        {"description", model.description},
        {"input_shape", example_shape(model.input().dims)},
        {"input_type", to_string(model.input().type)},
        {"inputs", inputs_json(model)},
        {"classes", model.classes},
        {"loss", loss_json(model)},
        {"output", model.output},
        {"layers", std::move(layers)},
        {"total",
         {{"parameters", model.parameter_count - state},
          {"state", state},
          {"bytes_f32", model.parameter_count * 4},
          {"mflop_per_example", model.flops / 1e6}}},
        {"architecture_sha256", architecture_hash(model)},
    };
    if (!model.heads.empty()) {
        nlohmann::json heads = nlohmann::json::array();
        for (const auto& h : model.heads) {
            nlohmann::json head = {
                {"output", h.value}, {"kind", to_string(h.kind)}, {"targets", h.target}, {"width", h.width}};
            if (!h.spatial.empty()) head["positions"] = h.spatial;  // a per-position head: [N, width, d1, ...]
            heads.push_back(std::move(head));
        }
        out["heads"] = std::move(heads);
    }
    if (model.recipe) out["recipe"] = to_json(*model.recipe);
    return out;
}

}  // namespace psrun::nn
