// What the recurrent kinds (lstm, gru, rnn: rnn.cpp) and their kernel (rnn_kernel.cpp) share: the
// cell, the directions, and where each direction's weights and biases live in the node's
// tensors, whichever layout the node binds:
//   "pytorch": per direction (suffix "" and, bidirectional, "_reverse") w_ih [G*H, I],
//     w_hh [G*H, H], b_ih [G*H], b_hh [G*H], gates in PyTorch's order (LSTM i, f, g, o; GRU r,
//     z, n; RNN one): nn.LSTM's, nn.GRU's and nn.RNN's parameters, byte for byte;
//   "onnx": W [dirs, G*H, I], R [dirs, G*H, H], B [dirs, 2*G*H] (W's biases, then R's), gates
//     in ONNX's order (LSTM i, o, f, c; GRU z, r, h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "workerd/nn/model_description.h"

namespace psrun::nn {

// kTanh, kRelu: the plain (Elman) cell h = act(W x + b_ih + R h + b_hh), nn.RNN's.
enum class RnnCell : std::uint8_t { kLstm, kGru, kLbrGru, kTanh, kRelu };

// The four parts of one direction's parameters.
enum class RnnPart : std::uint8_t { kWeightsInput, kWeightsHidden, kBiasInput, kBiasHidden };

struct RnnSpec {
    RnnCell cell = RnnCell::kLstm;
    std::int64_t hidden = 1;
    std::int64_t input = 1;  // features per step
    int dirs = 1;
    std::string direction = "forward";  // "forward", "reverse", "bidirectional"
    bool batch_first = false;
    bool bias = true;
    bool pytorch_layout = true;
    int gates() const { return cell == RnnCell::kLstm ? 4 : cell == RnnCell::kTanh || cell == RnnCell::kRelu ? 1 : 3; }
    // order[k]: the index, in the tensors' gate order, of oneDNN's gate k (LSTM i, f, c, o;
    // GRU u (= z), r, o (= n)).
    std::array<int, 4> order{0, 1, 2, 3};
};

// From a node's canonical attrs and its input's features per step.
RnnSpec rnn_spec(const Node& node, std::int64_t input_features);

struct RnnSlot {
    std::string name;
    std::vector<std::int64_t> shape;
};
// The tensor slots in the order the node binds them.
std::vector<RnnSlot> rnn_slots(const RnnSpec& spec);

// Where direction d's part lives: the slot (index into rnn_slots) and the offset in floats.
// REQUIRES: spec.bias for the bias parts.
struct RnnLocation {
    std::size_t slot = 0;
    std::int64_t offset = 0;
};
RnnLocation rnn_location(const RnnSpec& spec, int d, RnnPart part);

// PyTorch's and ONNX's gate orders: onnx_from_pytorch[k] is the PyTorch gate at ONNX position k
// (LSTM 0, 3, 1, 2; GRU 1, 0, 2; RNN 0), as PyTorch's exporter reorders them with Slice and
// Concat (one gate needs no reordering: the exporter writes the parameter itself).
std::vector<int> onnx_gates_from_pytorch(RnnCell cell);

class OnnxNodeImport;

// An ONNX LSTM, GRU or RNN node with sequence_lens (rnn_lengths_import.cpp): `layer` is the
// layer import_rnn built (kind, fields, tensors; no inputs), `x` its [L, N, I] input value and
// `states` its initial states ([dirs, N, H] values; empty: zeros). Emits the layers and binds
// outputs Y, Y_h and (LSTM, when read) Y_c.
Result<void> import_rnn_lengths(OnnxNodeImport& node, const nlohmann::json& layer, const std::string& x,
                                const std::vector<std::string>& states);

}  // namespace psrun::nn
