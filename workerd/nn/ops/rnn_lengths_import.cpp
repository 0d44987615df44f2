// ONNX LSTM, GRU and RNN with sequence_lens (rnn.h): padded sequences of different lengths, as
// torch.onnx writes nn.utils.rnn.pack_padded_sequence (each example's steps first, padding after).
// The recurrent layers run over every step; what the lengths change is computed around them from
// existing kinds, so the gradients are theirs. With t the step, s the example's length, L the
// padded length:
//   forward direction:  Y[t] = Y_full[t] * (t < s)       Y_h = sum_t Y_full[t] * (t == s - 1)
//     (steps past the end come after every real step, so they change nothing before it);
//   reverse direction:  the example's steps moved to the end of the sequence (x_r[t] =
//     x[t - (L - s)], zeros before), the layer run over that, and its outputs moved back
//     (Y[t] = Y_r[t + L - s] for t < s, zeros after): the reverse pass meets the real steps first,
//     from the last one, as PyTorch's packed sequence does; Y_h = Y[0].
// The moves are gather_nd with indices per example (an index past the end reads zeros). A
// bidirectional node becomes one layer per direction (PyTorch's layout: each binds its own
// direction's tensors), its outputs concatenated. Refused: ONNX's own layout (W, R, B of both
// directions in one tensor) when bidirectional.
// A graph that reads LSTM's last cell state (Y_c: c_n of a packed sequence, as an encoder hands
// (h_n, c_n) to a decoder) needs the state after each example's last step, which one layer over
// every step does not give: each direction is then a layer per step (stepwise_direction()), all
// binding the same tensors, whose states are kept where the example has no step t.
#include <map>
#include <string>
#include <vector>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/ops/rnn.h"

namespace psrun::nn {

namespace {

using nlohmann::json;

// The layers one node emits, named after it by OnnxNodeImport::emit.
struct Lowering {
    OnnxNodeImport& node;
    std::map<std::int64_t, std::string> scalars = {};  // int scalar constants, emitted where first read

    Result<std::string> layer(json l) { return node.emit(std::move(l)); }
    Result<std::string> op(const char* kind, json inputs) { return layer({{"kind", kind}, {"inputs", inputs}}); }
    Result<std::string> int_constant(json shape, json values) {
        return layer({{"kind", "constant"}, {"type", "int"}, {"shape", shape}, {"values", values}});
    }
    Result<std::string> scalar(std::int64_t v) {
        if (auto it = scalars.find(v); it != scalars.end()) return it->second;
        PSRUN_TRY_ASSIGN(auto name, int_constant(json::array(), {v}));
        return scalars[v] = name;
    }
    Result<std::string> transpose(const std::string& v, std::vector<std::int64_t> perm) {
        return layer({{"kind", "transpose"}, {"inputs", {v}}, {"perm", perm}});
    }
    Result<std::string> unsqueeze(const std::string& v, std::vector<std::int64_t> axes) {
        return layer({{"kind", "unsqueeze"}, {"inputs", {v}}, {"axes", axes}});
    }
    Result<std::string> squeeze(const std::string& v, std::vector<std::int64_t> axes) {
        return layer({{"kind", "squeeze"}, {"inputs", {v}}, {"axes", axes}});
    }
    // v[t:t+1] along axis 0.
    Result<std::string> step(const std::string& v, std::int64_t t) {
        return layer(
            {{"kind", "slice"}, {"inputs", {v}}, {"axes", {0}}, {"starts", {t}}, {"ends", {t + 1}}, {"steps", {1}}});
    }
    Result<std::string> float_zero() {
        if (zero.empty()) {
            PSRUN_TRY_ASSIGN(
                zero, layer({{"kind", "constant"}, {"type", "float"}, {"shape", json::array()}, {"values", {0.0f}}}));
        }
        return zero;
    }
    std::string zero = {};
    // An [N, L] int mask as floats [L, 1, N, 1], to scale Y [L, 1, N, H].
    Result<std::string> time_major_mask(const std::string& mask) {
        PSRUN_TRY_ASSIGN(auto f, layer({{"kind", "cast"}, {"inputs", {mask}}, {"to", "float"}}));
        PSRUN_TRY_ASSIGN(auto t, transpose(f, {1, 0}));
        return unsqueeze(t, {1, 3});
    }
    // v [L, N, F] with each example's step t taken from index[n, t] of it (an index past the end:
    // zeros): gather_nd in batch-major order.
    Result<std::string> move_steps(const std::string& v, const std::string& index) {
        PSRUN_TRY_ASSIGN(auto batch_major, transpose(v, {1, 0, 2}));
        PSRUN_TRY_ASSIGN(auto tuples, unsqueeze(index, {2}));
        PSRUN_TRY_ASSIGN(auto moved,
                         layer({{"kind", "gather_nd"}, {"inputs", {batch_major, tuples}}, {"batch_dims", 1}}));
        return transpose(moved, {1, 0, 2});
    }
};

struct Direction {
    std::string y;    // [L, 1, N, H]
    std::string y_h;  // [1, N, H]
    std::string y_c;  // [1, N, H]: stepwise_direction() only
};

// One direction's layer: `layer` with that direction, those tensors and inputs.
json direction_layer(const json& layer, const std::string& direction, const json& tensors, json inputs) {
    json l = layer;
    l["direction"] = direction;
    l["tensors"] = tensors;
    l["inputs"] = std::move(inputs);
    return l;
}

// Direction d's part of the states ([dirs, N, H] each) for a layer of one direction.
Result<json> direction_states(Lowering& emit, const std::vector<std::string>& states, int d, int dirs) {
    json out = json::array();
    for (const auto& s : states) {
        if (dirs == 1) {
            out.push_back(s);
            continue;
        }
        PSRUN_TRY_ASSIGN(auto part, emit.layer({{"kind", "slice"},
                                                {"inputs", {s}},
                                                {"axes", {0}},
                                                {"starts", {d}},
                                                {"ends", {d + 1}},
                                                {"steps", {1}}}));
        out.push_back(part);
    }
    return out;
}

// One direction of an LSTM as a layer per step t (from the last step back when `reverse`), each
// reading x[t] and the states so far: where t >= s (`valid` [L, N, 1] ints, t < s) the states
// are kept and Y[t] is zeros, so that a forward pass stops at the example's last step and a
// reverse one starts there, with the states PyTorch's packed sequence gives, c as h.
Result<Direction> stepwise_direction(Lowering& emit, const json& layer, const json& tensors, const std::string& x,
                                     const json& states, const std::string& valid, std::int64_t steps, bool reverse) {
    std::vector<std::string> y(static_cast<std::size_t>(steps));
    std::string h, c;  // empty: zeros
    if (states.size() == 2) {
        h = states[0].get<std::string>();
        c = states[1].get<std::string>();
    }
    PSRUN_TRY_ASSIGN(auto zero, emit.float_zero());
    for (std::int64_t i = 0; i < steps; ++i) {
        const std::int64_t t = reverse ? steps - 1 - i : i;
        PSRUN_TRY_ASSIGN(auto x_t, emit.step(x, t));
        PSRUN_TRY_ASSIGN(auto here, emit.step(valid, t));  // [1, N, 1]
        json inputs = {x_t};
        if (!h.empty()) inputs.insert(inputs.end(), {h, c});
        PSRUN_TRY_ASSIGN(auto cell, emit.layer(direction_layer(layer, "forward", tensors, inputs)));
        PSRUN_TRY_ASSIGN(y[static_cast<std::size_t>(t)], emit.op("where", {here, cell + ":1", zero}));
        PSRUN_TRY_ASSIGN(h, emit.op("where", {here, cell + ":1", h.empty() ? zero : h}));
        PSRUN_TRY_ASSIGN(c, emit.op("where", {here, cell + ":2", c.empty() ? zero : c}));
    }
    PSRUN_TRY_ASSIGN(auto all, emit.layer({{"kind", "concat"}, {"inputs", y}, {"axis", 0}}));  // [L, N, H]
    PSRUN_TRY_ASSIGN(auto y4, emit.unsqueeze(all, {1}));
    return Direction{y4, h, c};
}

}  // namespace

Result<void> import_rnn_lengths(OnnxNodeImport& node, const nlohmann::json& layer, const std::string& x,
                                const std::vector<std::string>& states) {
    const ValueInfo* xi = node.info(0);
    const ValueInfo* si = node.info(4);
    if (si == nullptr || si->type != ElementType::kInt || si->rank() != 1 || !si->dims[0].batch)
        return tl::unexpected(node.refuse("sequence_lens must be integers [N], one length per example"));
    const std::int64_t steps = xi->dims[0].value;
    const std::string direction = layer.at("direction").get<std::string>();
    const int dirs = direction == "bidirectional" ? 2 : 1;
    const json tensors = layer.at("tensors");
    if (dirs == 2 && layer.at("layout") != "pytorch")
        return tl::unexpected(
            node.refuse("sequence_lens on a bidirectional node whose W, R and B hold both directions is not "
                        "supported: export without constant folding, so the node reads PyTorch's parameters"));
    const bool stepwise = node.output_count() > 2 && node.output_read(2);  // Y_c
    Lowering emit{node};
    PSRUN_TRY_ASSIGN(auto s, node.value(4));
    std::vector<std::int64_t> range;
    for (std::int64_t t = 0; t < steps; ++t) range.push_back(t);
    PSRUN_TRY_ASSIGN(auto t, emit.int_constant({steps}, range));
    PSRUN_TRY_ASSIGN(auto length, emit.unsqueeze(s, {1}));  // [N, 1]
    std::string here;                                       // stepwise: [L, N, 1], t < s
    if (stepwise) {
        PSRUN_TRY_ASSIGN(auto less, emit.op("less", {t, length}));  // [N, L]
        PSRUN_TRY_ASSIGN(auto time_major, emit.transpose(less, {1, 0}));
        PSRUN_TRY_ASSIGN(here, emit.unsqueeze(time_major, {2}));
    }

    std::vector<Direction> done;
    for (int d = 0; d < dirs; ++d) {
        const bool reverse = direction == "reverse" || d == 1;
        json own = tensors;
        if (dirs == 2) {  // PyTorch's layout: "w_ih", ... and "w_ih_reverse", ...
            own = json::object();
            for (const auto& [slot, tensor] : tensors.items()) {
                const bool is_reverse = slot.size() > 8 && slot.compare(slot.size() - 8, 8, "_reverse") == 0;
                if (is_reverse == reverse) own[is_reverse ? slot.substr(0, slot.size() - 8) : slot] = tensor;
            }
        }
        PSRUN_TRY_ASSIGN(auto own_states, direction_states(emit, states, d, dirs));
        Direction out;
        if (stepwise) {
            PSRUN_TRY_ASSIGN(out, stepwise_direction(emit, layer, own, x, own_states, here, steps, reverse));
        } else if (!reverse) {
            json inputs = {x};
            for (const auto& st : own_states) inputs.push_back(st);
            PSRUN_TRY_ASSIGN(auto y, emit.layer(direction_layer(layer, "forward", own, inputs)));
            PSRUN_TRY_ASSIGN(auto valid, emit.op("less", {t, length}));  // [N, L]
            PSRUN_TRY_ASSIGN(auto valid_f, emit.time_major_mask(valid));
            PSRUN_TRY_ASSIGN(auto masked, emit.op("mul", {y, valid_f}));
            PSRUN_TRY_ASSIGN(auto one, emit.scalar(1));
            PSRUN_TRY_ASSIGN(auto last_step, emit.op("sub", {length, one}));
            PSRUN_TRY_ASSIGN(auto last, emit.op("equal", {t, last_step}));
            PSRUN_TRY_ASSIGN(auto last_f, emit.time_major_mask(last));
            PSRUN_TRY_ASSIGN(auto picked, emit.op("mul", {y, last_f}));
            PSRUN_TRY_ASSIGN(
                auto y_h,
                emit.layer(
                    {{"kind", "reduce_sum"}, {"inputs", {picked}}, {"axes", {0}}, {"keepdims", false}}));  // [1, N, H]
            out = {masked, y_h, {}};
        } else {
            // In: x_r[t] = x[t + s - L]; a negative index is moved past the end (zeros).
            PSRUN_TRY_ASSIGN(auto padded, emit.scalar(steps));
            PSRUN_TRY_ASSIGN(auto zero, emit.scalar(0));
            PSRUN_TRY_ASSIGN(auto twice, emit.scalar(2 * steps));
            PSRUN_TRY_ASSIGN(auto sum, emit.op("add", {t, length}));
            PSRUN_TRY_ASSIGN(auto source, emit.op("sub", {sum, padded}));
            PSRUN_TRY_ASSIGN(auto negative, emit.op("less", {source, zero}));
            PSRUN_TRY_ASSIGN(auto past, emit.op("mul", {negative, twice}));
            PSRUN_TRY_ASSIGN(auto in_range, emit.op("add", {source, past}));
            PSRUN_TRY_ASSIGN(auto moved_in, emit.move_steps(x, in_range));
            json inputs = {moved_in};
            for (const auto& st : own_states) inputs.push_back(st);
            PSRUN_TRY_ASSIGN(auto y, emit.layer(direction_layer(layer, "reverse", own, inputs)));
            // Out: Y[t] = Y_r[t + L - s] (past the end for t >= s: zeros).
            PSRUN_TRY_ASSIGN(auto shifted, emit.op("add", {t, padded}));
            PSRUN_TRY_ASSIGN(auto target, emit.op("sub", {shifted, length}));
            PSRUN_TRY_ASSIGN(auto steps_major, emit.squeeze(y, {1}));
            PSRUN_TRY_ASSIGN(auto moved_out, emit.move_steps(steps_major, target));  // [L, N, H]
            PSRUN_TRY_ASSIGN(auto y_back, emit.unsqueeze(moved_out, {1}));
            PSRUN_TRY_ASSIGN(auto y_h, emit.layer({{"kind", "slice"},
                                                   {"inputs", {moved_out}},
                                                   {"axes", {0}},
                                                   {"starts", {0}},
                                                   {"ends", {1}},
                                                   {"steps", {1}}}));
            out = {y_back, y_h, {}};
        }
        done.push_back(out);
    }
    if (dirs == 1) {
        node.bind_output(0, done[0].y);
        node.bind_output(1, done[0].y_h);
        if (stepwise) node.bind_output(2, done[0].y_c);
        return {};
    }
    PSRUN_TRY_ASSIGN(auto y, emit.layer({{"kind", "concat"}, {"inputs", {done[0].y, done[1].y}}, {"axis", 1}}));
    PSRUN_TRY_ASSIGN(auto y_h, emit.layer({{"kind", "concat"}, {"inputs", {done[0].y_h, done[1].y_h}}, {"axis", 0}}));
    node.bind_output(0, y);
    node.bind_output(1, y_h);
    if (stepwise) {
        PSRUN_TRY_ASSIGN(auto y_c,
                         emit.layer({{"kind", "concat"}, {"inputs", {done[0].y_c, done[1].y_c}}, {"axis", 0}}));
        node.bind_output(2, y_c);
    }
    return {};
}

}  // namespace psrun::nn
