// claim_rnn_weights (onnx_importer.h). PyTorch's exporter (torch.onnx, _generic_rnn) writes an
// nn.LSTM / nn.GRU / nn.RNN layer's parameters into ONNX's gate order with, for a parameter p
// [G*H, ...],
//   reform(p) = Concat(Slice(p, a*H, b*H, axes [0]), ...)    runs of PyTorch gates in ONNX order
//                                                             (nn.RNN's one gate: p itself)
//   W = Unsqueeze(reform(w_ih), [0])                          one direction
//   W = Concat(Unsqueeze(reform(w_ih)), Unsqueeze(reform(w_ih_reverse)))        two directions
//   B = Unsqueeze(Concat(reform(b_ih), reform(b_hh)), [0])    per direction, joined the same way
// and R as W from w_hh. Where an LSTM or GRU node's W, R and B are exactly that (every inner value
// read only by the next node), those nodes are consumed and W carries a note naming PyTorch's
// tensors, which the kind binds with layout "pytorch" (workerd/nn/ops/rnn.cpp).
#include "workerd/nn/ops/rnn.h"
#include "workerd/onnx/onnx_importer.h"

namespace psrun::onnx_io {

namespace {

class Claim {
  public:
    explicit Claim(Importer& im) : im_(im), g_(im.graph()) {}

    // Matches one RNN node; on success consumes the reordering and notes W.
    void rnn(int index) {
        const auto& node = g_.graph().node(index);
        const std::string& op = node.op_type();
        auto hidden = int_attr(node, "hidden_size", 0);
        auto direction = string_attr(node, "direction", "forward");
        if (!hidden || *hidden < 1 || !direction || node.input_size() < 3) return;
        const int dirs = *direction == "bidirectional" ? 2 : 1;
        hidden_ = *hidden;
        gates_ = nn::onnx_gates_from_pytorch(op == "LSTM"  ? nn::RnnCell::kLstm
                                             : op == "GRU" ? nn::RnnCell::kGru
                                                           : nn::RnnCell::kTanh);
        nodes_.clear();
        nlohmann::json tensors = nlohmann::json::object();
        const bool bias = node.input_size() > 3 && !node.input(3).empty();
        const char* names[] = {"w_ih", "w_hh"};
        for (int k = 0; k < 2; ++k) {
            const auto params = per_direction(node.input(1 + k), index, dirs, false);
            if (params.empty()) return;
            for (int d = 0; d < dirs; ++d) tensors[std::string(names[k]) + (d == 1 ? "_reverse" : "")] = params[d];
        }
        if (bias) {
            const auto params = per_direction(node.input(3), index, dirs, true);
            if (params.empty()) return;
            for (int d = 0; d < dirs; ++d) {
                const std::string suffix = d == 1 ? "_reverse" : "";
                tensors["b_ih" + suffix] = params[2 * d];
                tensors["b_hh" + suffix] = params[2 * d + 1];
            }
        }
        for (auto& [slot, initializer] : tensors.items()) initializer = im_.slot_tensor(initializer.get<std::string>());
        for (const int n : nodes_) im_.consume(n);
        im_.note(node.input(1), {{"pattern", "pytorch_rnn_weights"}, {"bias", bias}, {"tensors", tensors}});
    }

  private:
    // A constant int vector (an integer initializer or a Constant node).
    std::optional<std::vector<std::int64_t>> ints(const std::string& value) const {
        const onnx::TensorProto* t = g_.initializer(value);
        if (t == nullptr) t = g_.constant(value);
        if (t == nullptr || t->data_type() == onnx::TensorProto::FLOAT) return std::nullopt;
        auto v = read_ints(*t);
        if (!v) return std::nullopt;
        return *v;
    }

    // The node of type `op` producing `value`, which only `reader` reads; -1 otherwise.
    int producer(const std::string& value, const char* op, int reader) const {
        if (value.empty() || value == g_.output()) return -1;
        for (const int r : g_.readers(value))
            if (r != reader) return -1;
        const int p = g_.producer(value);
        if (p < 0 || g_.graph().node(p).op_type() != op || im_.consumed(p)) return -1;
        return p;
    }

    // `value` = Unsqueeze(x, [0]) read only by `reader`: x ("" otherwise).
    std::string unsqueezed(const std::string& value, int reader) {
        const int u = producer(value, "Unsqueeze", reader);
        if (u < 0) return "";
        const auto& n = g_.graph().node(u);
        std::optional<std::vector<std::int64_t>> axes;
        if (n.input_size() > 1) axes = ints(n.input(1));
        else if (auto a = ints_attr(n, "axes"); a && *a) axes = **a;
        if (axes != std::vector<std::int64_t>{0}) return "";
        nodes_.push_back(u);
        return n.input(0);
    }

    // The inputs of `value` = Concat(..., axis 0) read only by `reader` (empty otherwise).
    std::vector<std::string> concatenated(const std::string& value, int reader) {
        const int c = producer(value, "Concat", reader);
        if (c < 0) return {};
        const auto& n = g_.graph().node(c);
        auto axis = int_attr(n, "axis", -1);
        if (!axis || *axis != 0) return {};
        nodes_.push_back(c);
        return {n.input().begin(), n.input().end()};
    }

    // `value` = reform(p) read only by `reader`, p a float initializer [G*H, ...]: p ("" otherwise).
    std::string reformed(const std::string& value, int reader) {
        if (gates_.size() == 1) {  // no reordering: the parameter [H, ...] itself
            const auto* init = g_.initializer(value);
            const bool only = g_.readers(value).size() == 1 && g_.readers(value).front() == reader;
            return init != nullptr && only && init->data_type() == onnx::TensorProto::FLOAT && init->dims_size() >= 1 &&
                           init->dims(0) == hidden_
                       ? value
                       : "";
        }
        const int c = g_.producer(value);
        const auto pieces = concatenated(value, reader);
        if (pieces.empty()) return "";
        std::string param;
        std::vector<int> blocks;
        for (const auto& piece : pieces) {
            const int s = producer(piece, "Slice", c);
            if (s < 0) return "";
            const auto& n = g_.graph().node(s);
            const auto* init = g_.initializer(n.input(0));
            if (init == nullptr || init->data_type() != onnx::TensorProto::FLOAT || init->dims_size() < 1 ||
                init->dims(0) != static_cast<std::int64_t>(gates_.size()) * hidden_ ||
                (!param.empty() && param != n.input(0)))
                return "";
            param = n.input(0);
            if (n.input_size() < 3) return "";
            const auto start = ints(n.input(1)), end = ints(n.input(2));
            if (!start || !end || start->size() != 1 || end->size() != 1) return "";
            if (n.input_size() > 3 && !n.input(3).empty() && ints(n.input(3)) != std::vector<std::int64_t>{0})
                return "";
            if (n.input_size() > 4 && !n.input(4).empty() && ints(n.input(4)) != std::vector<std::int64_t>{1})
                return "";
            const std::int64_t a = (*start)[0], b = (*end)[0];
            if (a < 0 || b <= a || b > init->dims(0) || a % hidden_ != 0 || b % hidden_ != 0) return "";  // within p
            for (std::int64_t k = a / hidden_; k < b / hidden_; ++k) blocks.push_back(static_cast<int>(k));
            nodes_.push_back(s);
        }
        return blocks == gates_ ? param : "";
    }

    // W/R (bias false: one parameter per direction) or B (two per direction: b_ih, b_hh) of a
    // node with `dirs` directions; empty when `value` is not PyTorch's reordering.
    std::vector<std::string> per_direction(const std::string& value, int reader, int dirs, bool bias) {
        std::vector<std::string> per_dir;  // the Unsqueeze outputs
        if (dirs == 1) {
            per_dir.push_back(value);
        } else {
            per_dir = concatenated(value, reader);
            if (per_dir.size() != 2) return {};
        }
        const int joined = dirs == 1 ? reader : g_.producer(value);
        std::vector<std::string> params;
        for (const auto& u : per_dir) {
            const int unsqueeze = g_.producer(u);
            const std::string inner = unsqueezed(u, joined);
            if (inner.empty()) return {};
            if (!bias) {
                const std::string p = reformed(inner, unsqueeze);
                if (p.empty()) return {};
                params.push_back(p);
                continue;
            }
            const int both = g_.producer(inner);
            const auto halves = concatenated(inner, unsqueeze);
            if (halves.size() != 2) return {};
            for (const auto& h : halves) {
                const std::string p = reformed(h, both);
                if (p.empty()) return {};
                params.push_back(p);
            }
        }
        return params;
    }

    Importer& im_;
    const GraphIndex& g_;
    std::int64_t hidden_ = 1;
    std::vector<int> gates_;
    std::vector<int> nodes_;
};

}  // namespace

Result<void> claim_rnn_weights(Importer& importer) {
    const auto& graph = importer.graph().graph();
    Claim claim(importer);
    for (int i = 0; i < graph.node_size(); ++i) {
        const std::string& op = graph.node(i).op_type();
        if ((op == "LSTM" || op == "GRU" || op == "RNN") && importer.graph().needed(i)) claim.rnn(i);
    }
    return {};
}

}  // namespace psrun::onnx_io
