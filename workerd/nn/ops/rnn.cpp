// Recurrent layers (one layer each; stack them for depth, as ONNX does):
//   lstm: {"kind": "lstm", "hidden": H, "direction": "forward" | "reverse" | "bidirectional",
//          "batch_first": false, "layout": "pytorch" | "onnx", "bias": true,
//          "weight_init": uniform(1/sqrt(H)), "bias_init": uniform(1/sqrt(H))}
//   gru:  the same and "linear_before_reset": true (PyTorch's GRU; false: the original GRU,
//          r applied to h before the recurrent matmul).
//   rnn:  the same and "activation": "tanh" | "relu" (nn.RNN's nonlinearity; default tanh).
// Inputs: x [L, N, I] (batch_first: [N, L, I]), optionally h0 [dirs, N, H] and (lstm) c0
// [dirs, N, H]; absent states are zeros. Outputs: Y [L, dirs, N, H] (batch_first:
// [N, L, dirs, H]), Y_h [dirs, N, H] (the last step's hidden state per direction), and (lstm)
// Y_c [dirs, N, H]: ONNX's LSTM, GRU and RNN outputs. Tensors per "layout" (rnn.h): "pytorch" binds
// nn.LSTM/nn.GRU/nn.RNN's own parameters (w_ih, w_hh, b_ih, b_hh, "_reverse" for the second
// direction), "onnx" the W, R, B of ONNX's operator. The defaults are PyTorch's.
// ONNX: LSTM, GRU, RNN (activations Tanh or Relu). PyTorch's exporter reorders the gates with Slice/Concat/Unsqueeze on
// its parameters; the importer recognises that (claim_rnn_weights, workerd/onnx/) and binds the parameters with layout
// "pytorch", and export writes the reordering again, so the file keeps PyTorch's parameter names and layout. Plain
// W/R/B initializers (a folded export, other producers) bind with layout "onnx".
#include "workerd/nn/ops/rnn.h"

#include <algorithm>
#include <cmath>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

RnnSpec rnn_spec(const Node& node, std::int64_t input_features) {
    RnnSpec s;
    const auto& a = node.attrs;
    if (node.op == "lstm") s.cell = RnnCell::kLstm;
    else if (node.op == "rnn") s.cell = a.at("activation") == "relu" ? RnnCell::kRelu : RnnCell::kTanh;
    else s.cell = a.at("linear_before_reset").get<bool>() ? RnnCell::kLbrGru : RnnCell::kGru;
    s.hidden = a.at("hidden").get<std::int64_t>();
    s.input = input_features;
    s.direction = a.at("direction").get<std::string>();
    s.dirs = s.direction == "bidirectional" ? 2 : 1;
    s.batch_first = a.at("batch_first").get<bool>();
    s.bias = a.at("bias").get<bool>();
    s.pytorch_layout = a.at("layout") == "pytorch";
    if (s.cell == RnnCell::kLstm)
        s.order = s.pytorch_layout ? std::array<int, 4>{0, 1, 2, 3} : std::array<int, 4>{0, 2, 3, 1};
    else if (s.gates() == 1) s.order = {0, 0, 0, 0};
    else s.order = s.pytorch_layout ? std::array<int, 4>{1, 0, 2, 0} : std::array<int, 4>{0, 1, 2, 0};
    return s;
}

std::vector<RnnSlot> rnn_slots(const RnnSpec& s) {
    const std::int64_t gh = s.gates() * s.hidden;
    if (!s.pytorch_layout) {
        std::vector<RnnSlot> out{{"W", {s.dirs, gh, s.input}}, {"R", {s.dirs, gh, s.hidden}}};
        if (s.bias) out.push_back({"B", {s.dirs, 2 * gh}});
        return out;
    }
    std::vector<RnnSlot> out;
    for (int d = 0; d < s.dirs; ++d) {
        const std::string suffix = d == 1 ? "_reverse" : "";
        out.push_back({"w_ih" + suffix, {gh, s.input}});
        out.push_back({"w_hh" + suffix, {gh, s.hidden}});
        if (s.bias) {
            out.push_back({"b_ih" + suffix, {gh}});
            out.push_back({"b_hh" + suffix, {gh}});
        }
    }
    return out;
}

RnnLocation rnn_location(const RnnSpec& s, int d, RnnPart part) {
    const std::int64_t gh = s.gates() * s.hidden;
    const auto p = static_cast<std::size_t>(part);
    if (s.pytorch_layout) return {static_cast<std::size_t>(d) * (s.bias ? 4 : 2) + p, 0};
    switch (part) {
        case RnnPart::kWeightsInput: return {0, d * gh * s.input};
        case RnnPart::kWeightsHidden: return {1, d * gh * s.hidden};
        case RnnPart::kBiasInput: return {2, d * 2 * gh};
        case RnnPart::kBiasHidden: return {2, d * 2 * gh + gh};
    }
    return {};
}

std::vector<int> onnx_gates_from_pytorch(RnnCell cell) {
    switch (cell) {
        case RnnCell::kLstm: return {0, 3, 1, 2};
        case RnnCell::kGru:
        case RnnCell::kLbrGru: return {1, 0, 2};
        case RnnCell::kTanh:
        case RnnCell::kRelu: break;
    }
    return {0};
}

namespace {

Result<void> parse_rnn(FieldReader& reader, nlohmann::json& attrs, const std::string& kind) {
    PSRUN_TRY_ASSIGN(auto hidden, reader.integer("hidden", std::nullopt, 1, 1 << 20));
    PSRUN_TRY_ASSIGN(auto direction, reader.choice("direction", 0, {"forward", "reverse", "bidirectional"}));
    PSRUN_TRY_ASSIGN(auto batch_first, reader.boolean("batch_first", false));
    PSRUN_TRY_ASSIGN(auto layout, reader.choice("layout", 0, {"pytorch", "onnx"}));
    attrs["hidden"] = hidden;
    attrs["direction"] = std::vector<std::string>{"forward", "reverse", "bidirectional"}[direction];
    attrs["batch_first"] = batch_first;
    attrs["layout"] = layout == 0 ? "pytorch" : "onnx";
    if (kind == "gru") {
        PSRUN_TRY_ASSIGN(auto lbr, reader.boolean("linear_before_reset", true));
        attrs["linear_before_reset"] = lbr;
    }
    if (kind == "rnn") {
        PSRUN_TRY_ASSIGN(auto activation, reader.choice("activation", 0, {"tanh", "relu"}));
        attrs["activation"] = activation == 0 ? "tanh" : "relu";
    }
    // PyTorch's default: every weight and bias uniform in +-1/sqrt(H).
    const Initializer pytorch{InitKind::kUniform, 1.0 / std::sqrt(static_cast<double>(hidden))};
    const bool bias_init_given = reader.has("bias_init");
    if (auto ok = parse_trainable_options(reader, attrs, pytorch); !ok) return ok;
    if (attrs.at("bias").get<bool>() && !bias_init_given) attrs["bias_init"] = to_json(pytorch);
    return {};
}

Result<void> parse_lstm(FieldReader& reader, nlohmann::json& attrs) { return parse_rnn(reader, attrs, "lstm"); }
Result<void> parse_gru(FieldReader& reader, nlohmann::json& attrs) { return parse_rnn(reader, attrs, "gru"); }
Result<void> parse_plain_rnn(FieldReader& reader, nlohmann::json& attrs) { return parse_rnn(reader, attrs, "rnn"); }

Result<void> infer_rnn(InferContext& context) {
    const bool lstm = context.node().op == "lstm";
    const ValueInfo& x = context.input(0);
    const bool batch_first = context.attr_bool("batch_first");
    const std::size_t b = batch_first ? 0 : 1, t = batch_first ? 1 : 0;
    const char* layout = batch_first ? "[N, L, I]" : "[L, N, I]";
    if (x.type != ElementType::kFloat || x.rank() != 3 || !x.dims[b].batch || x.dims[t].batch || x.dims[2].batch)
        return tl::unexpected(op_error(std::string("expects a float sequence ") + layout + " (batch_first " +
                                       (batch_first ? "true" : "false") + "), got " + to_string(x.type) + " " +
                                       to_string(x.dims)));
    const RnnSpec spec = rnn_spec(context.node(), x.dims[2].value);
    const Dim n = x.dims[b], steps = x.dims[t];
    const Dims state{Dim::of(spec.dirs), n, Dim::of(spec.hidden)};
    for (std::size_t i = 1; i < context.input_count(); ++i) {
        const ValueInfo& s = context.input(i);
        if (s.type != ElementType::kFloat || s.dims != state)
            return tl::unexpected(op_error(std::string(i == 1 ? "the initial hidden state" : "the initial cell state") +
                                           " must be float " + to_string(state) + ", got " + to_string(s.dims)));
    }
    const Dim dirs = Dim::of(spec.dirs), h = Dim::of(spec.hidden);
    context.set_output(0, ValueInfo{batch_first ? Dims{n, steps, dirs, h} : Dims{steps, dirs, n, h}});
    context.set_output(1, ValueInfo{state});
    if (lstm) context.set_output(2, ValueInfo{state});
    for (const auto& slot : rnn_slots(spec)) {
        const bool bias = slot.name[0] == 'b' || slot.name[0] == 'B';
        const auto init = attr_initializer(context.attrs(), bias ? "bias_init" : "weight_init");
        if (auto ok = context.tensor(slot.name, slot.shape, init); !ok) return ok;
    }
    // Per step and direction: the gate matmuls, one per gate element, and the state update
    // (lstm: c = f*c + i*g, h = o*tanh(c); gru: h = z*h + (1-z)*n; rnn: the activation).
    const double gh = static_cast<double>(spec.gates() * spec.hidden);
    const double update = lstm ? 5.0 : spec.gates() == 1 ? 1.0 : 4.0;
    const double per_step =
        2.0 * gh * static_cast<double>(spec.input + spec.hidden) + gh + update * static_cast<double>(spec.hidden);
    context.add_flops(per_step * static_cast<double>(steps.value) * spec.dirs);
    return {};
}

// RNN's activations: one per direction, Tanh (the default) or Relu, the same in both (nn.RNN's
// nonlinearity): "tanh" or "relu". LSTM and GRU: only their defaults (oneDNN's cells).
Result<std::string> rnn_activation(OnnxNodeImport& node, int dirs) {
    const bool plain = node.op_type() == "RNN";
    PSRUN_TRY_ASSIGN(auto given, node.strings_attr("activations"));
    std::vector<std::string> defaults;
    if (node.op_type() == "LSTM") defaults = {"Sigmoid", "Tanh", "Tanh"};
    else if (!plain) defaults = {"Sigmoid", "Tanh"};
    else defaults = {given && !given->empty() ? given->front() : "Tanh"};
    if (plain && defaults.front() != "Tanh" && defaults.front() != "Relu")
        return tl::unexpected(node.refuse("activation " + defaults.front() +
                                          ": the engine's RNN cell is Tanh or Relu (nn.RNN's nonlinearity)"));
    std::vector<std::string> expected;
    for (int d = 0; d < dirs; ++d) expected.insert(expected.end(), defaults.begin(), defaults.end());
    if (given && *given != expected && !(dirs == 2 && *given == defaults)) {
        std::string listed;
        for (const auto& a : *given) listed += (listed.empty() ? "" : ", ") + a;
        return tl::unexpected(node.refuse(
            "activations [" + listed + "] are not supported: " +
            (plain ? "one activation, Tanh or Relu, the same for each direction" : "only the default cells")));
    }
    return defaults.front() == "Relu" ? "relu" : "tanh";
}

Result<void> import_rnn(OnnxNodeImport& node) {
    const bool lstm = node.op_type() == "LSTM";
    const bool plain = node.op_type() == "RNN";
    auto hidden = node.int_attr("hidden_size", 0);
    auto direction = node.string_attr("direction", "forward");
    auto lbr = node.int_attr("linear_before_reset", 0);
    auto forget = node.int_attr("input_forget", 0);
    auto layout = node.int_attr("layout", 0);
    for (const auto* r : {&hidden, &lbr, &forget, &layout})
        if (!*r) return tl::unexpected(r->error());
    if (!direction) return tl::unexpected(direction.error());
    if (*hidden < 1) return tl::unexpected(node.refuse("hidden_size must be given and positive"));
    if (*direction != "forward" && *direction != "reverse" && *direction != "bidirectional")
        return tl::unexpected(node.refuse("direction '" + *direction + "' is none of forward, reverse, bidirectional"));
    if (node.has_attr("clip")) return tl::unexpected(node.refuse("clip is not supported (oneDNN's cells do not clip)"));
    if (node.has_attr("activation_alpha") || node.has_attr("activation_beta"))
        return tl::unexpected(node.refuse("activation_alpha/beta are not supported"));
    if (*forget != 0) return tl::unexpected(node.refuse("input_forget=1 is not supported"));
    if (*layout != 0)
        return tl::unexpected(
            node.refuse("layout=1 (batch-first X, opset 14) is not supported: PyTorch's exporter writes layout 0 with "
                        "a Transpose"));
    if (lstm && node.has_input(7)) return tl::unexpected(node.refuse("peepholes (input P) are not supported"));
    const ValueInfo* x = node.info(0);
    if (x == nullptr || x->rank() != 3 || !x->dims[1].batch)
        return tl::unexpected(node.refuse("X must be a [L, N, I] sequence with the batch on axis 1"));
    PSRUN_TRY_ASSIGN(auto activation, rnn_activation(node, *direction == "bidirectional" ? 2 : 1));
    PSRUN_TRY_ASSIGN(auto input, node.value(0));

    nlohmann::json layer = {{"kind", lstm    ? "lstm"
                                     : plain ? "rnn"
                                             : "gru"},
                            {"hidden", *hidden},
                            {"direction", *direction},
                            {"batch_first", false}};
    if (plain) layer["activation"] = activation;
    else if (!lstm) layer["linear_before_reset"] = *lbr != 0;
    nlohmann::json tensors = nlohmann::json::object();
    if (const nlohmann::json* found = node.pattern(1); found && found->value("pattern", "") == "pytorch_rnn_weights") {
        layer["layout"] = "pytorch";
        layer["bias"] = found->at("bias").get<bool>();
        tensors = found->at("tensors");
    } else {
        layer["layout"] = "onnx";
        layer["bias"] = node.has_input(3);
        const char* names[] = {"W", "R", "B"};
        for (std::size_t i = 1; i <= 3; ++i) {
            if (!node.has_input(i)) continue;
            PSRUN_TRY_ASSIGN(auto t, node.slot(i));
            tensors[names[i - 1]] = t;
        }
    }
    layer["tensors"] = tensors;
    // Initial states: zeros (absent, or a zero fill) need no input.
    const std::size_t states_count = lstm ? 2 : 1;
    bool given = false;
    for (std::size_t k = 0; k < states_count; ++k)
        if (node.has_input(5 + k) && node.fill(5 + k) != std::optional<float>(0.0f)) given = true;
    std::vector<std::string> states;
    if (given) {
        for (std::size_t k = 0; k < states_count; ++k) {
            if (!node.has_input(5 + k))
                return tl::unexpected(
                    node.refuse("an initial cell state without an initial hidden state is not supported"));
            PSRUN_TRY_ASSIGN(auto v, node.value(5 + k));
            states.push_back(v);
        }
    }
    // sequence_lens: a known one that is the full length everywhere changes nothing.
    if (node.has_input(4)) {
        const auto known = node.ints(4);
        const bool full =
            known && std::all_of(known->begin(), known->end(), [x](std::int64_t s) { return s == x->dims[0].value; });
        if (!full) return import_rnn_lengths(node, layer, input, states);
    }
    nlohmann::json inputs = {input};
    for (const auto& st : states) inputs.push_back(st);
    layer["inputs"] = inputs;
    PSRUN_TRY_ASSIGN(auto name, node.emit(layer));
    node.bind_output(0, name);
    node.bind_output(1, name + ":1");
    if (lstm) node.bind_output(2, name + ":2");
    return {};
}

// PyTorch's exporter's gate reordering of one [G*H, ...] parameter: Slice blocks and Concat
// (one gate: the parameter itself).
std::string reordered(OnnxNodeExport& out, const std::string& tensor, RnnCell cell, std::int64_t hidden) {
    const std::string& base = out.node().name;
    std::vector<std::string> pieces;
    const auto order = onnx_gates_from_pytorch(cell);
    if (order.size() == 1) return tensor;
    // Consecutive PyTorch gates form one slice, as the exporter writes them (LSTM: 0 | 3 | 1-2).
    for (std::size_t k = 0; k < order.size();) {
        std::size_t e = k + 1;
        while (e < order.size() && order[e] == order[e - 1] + 1) ++e;
        const std::string piece = out.fresh(tensor + "/gates");
        out.add(
            "Slice",
            {tensor, out.int64_constant(base + "/start", {order[k] * hidden}),
             out.int64_constant(base + "/end", {(order[e - 1] + 1) * hidden}), out.int64_constant(base + "/axis", {0})},
            {piece});
        pieces.push_back(piece);
        k = e;
    }
    const std::string joined = out.fresh(tensor + "/onnx_order");
    out.add("Concat", pieces, {joined}, {{"axis", std::int64_t{0}}});
    return joined;
}

std::string unsqueezed(OnnxNodeExport& out, const std::string& value) {
    const std::string u = out.fresh(value + "/unsqueeze");
    out.add("Unsqueeze", {value, out.int64_constant(out.node().name + "/axes", {0})}, {u});
    return u;
}

std::string concat(OnnxNodeExport& out, const std::vector<std::string>& parts, const std::string& hint) {
    if (parts.size() == 1) return parts.front();
    const std::string c = out.fresh(hint);
    out.add("Concat", parts, {c}, {{"axis", std::int64_t{0}}});
    return c;
}

Result<void> export_rnn(OnnxNodeExport& out) {
    const Node& node = out.node();
    const bool lstm = node.op == "lstm";
    const ValueInfo& x = out.model().value(node.inputs[0]);
    const RnnSpec spec = rnn_spec(node, x.dims[2].value);
    const bool plain = spec.gates() == 1;
    const std::size_t first = node.data_inputs;
    std::vector<std::string> weights;  // W, R and B ("" without bias)
    if (!spec.pytorch_layout) {
        weights = {out.input(first), out.input(first + 1), spec.bias ? out.input(first + 2) : ""};
    } else {
        std::vector<std::string> w, r, bias;
        for (int d = 0; d < spec.dirs; ++d) {
            auto at = [&](RnnPart p) { return out.input(first + rnn_location(spec, d, p).slot); };
            w.push_back(unsqueezed(out, reordered(out, at(RnnPart::kWeightsInput), spec.cell, spec.hidden)));
            r.push_back(unsqueezed(out, reordered(out, at(RnnPart::kWeightsHidden), spec.cell, spec.hidden)));
            if (spec.bias)
                bias.push_back(
                    unsqueezed(out, concat(out,
                                           {reordered(out, at(RnnPart::kBiasInput), spec.cell, spec.hidden),
                                            reordered(out, at(RnnPart::kBiasHidden), spec.cell, spec.hidden)},
                                           node.name + "/B_dir")));
        }
        weights = {concat(out, w, node.name + "/W"), concat(out, r, node.name + "/R"),
                   spec.bias ? concat(out, bias, node.name + "/B") : ""};
    }
    std::string seq = out.input(0);
    if (spec.batch_first) {
        seq = out.fresh(node.name + "/time_major");
        out.add("Transpose", {out.input(0)}, {seq}, {{"perm", std::vector<std::int64_t>{1, 0, 2}}});
    }
    std::vector<std::string> inputs = {seq, weights[0], weights[1], weights[2], ""};
    for (std::size_t i = 1; i < node.data_inputs; ++i) inputs.push_back(out.input(i));
    while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
    std::string y = out.output(0);
    if (spec.batch_first) y = out.fresh(node.name + "/time_major_y");
    std::vector<std::string> outputs = {y, out.output(1)};
    if (lstm) outputs.push_back(out.output(2));
    std::vector<std::pair<std::string, OnnxAttr>> attrs = {{"hidden_size", spec.hidden}, {"direction", spec.direction}};
    if (plain)
        attrs.emplace_back("activations", std::vector<std::string>(static_cast<std::size_t>(spec.dirs),
                                                                   spec.cell == RnnCell::kRelu ? "Relu" : "Tanh"));
    else if (!lstm) attrs.emplace_back("linear_before_reset", std::int64_t{spec.cell == RnnCell::kLbrGru ? 1 : 0});
    out.add(lstm ? "LSTM" : plain ? "RNN" : "GRU", inputs, outputs, attrs, node.name);
    if (spec.batch_first) out.add("Transpose", {y}, {out.output(0)}, {{"perm", std::vector<std::int64_t>{2, 0, 1, 3}}});
    return {};
}

// Per time step, every input and recurrent weight once (the biases are adds): W and R, or w_ih
// and w_hh (and their _reverse), times the sequence length.
TrainingMacs rnn_macs(const MacsContext& c) {
    const auto& out = c.node.output_info.front().dims;
    if (out.size() < 2) return {};
    double weights = 0;
    for (std::size_t k = 0; k < c.node.slots.size(); ++k) {
        const TensorDef* t = c.slot_tensor(k);
        if (t != nullptr && c.node.slots[k][0] != 'b' && c.node.slots[k][0] != 'B')
            weights += static_cast<double>(t->size);
    }
    const bool batch_first = c.node.attrs.value("batch_first", false);
    return c.weighted(weights * static_cast<double>(out[batch_first ? 1 : 0].value));
}

}  // namespace

const OpSchema& lstm_schema() {
    static const OpSchema s{"lstm", 1, 3, parse_lstm, infer_rnn, {"LSTM"}, import_rnn, export_rnn, true, rnn_macs};
    return s;
}

const OpSchema& gru_schema() {
    static const OpSchema s{"gru", 1, 2, parse_gru, infer_rnn, {"GRU"}, import_rnn, export_rnn, true, rnn_macs};
    return s;
}

const OpSchema& rnn_schema() {
    static const OpSchema s{"rnn", 1, 2, parse_plain_rnn, infer_rnn, {"RNN"}, import_rnn, export_rnn, true, rnn_macs};
    return s;
}

}  // namespace psrun::nn
