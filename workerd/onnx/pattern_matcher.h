// What every fused-pattern matcher of the importer asks of the graph (onnx_patterns.cpp,
// onnx_patterns_norm.cpp): a node's readers, known constants, initializers. Borrows the
// Importer for the duration of one import_pattern call; not thread-safe.
#pragma once

#include <optional>
#include <string>

#include "workerd/onnx/onnx_importer.h"

namespace psrun::onnx_io {

class PatternMatcher {
  public:
    explicit PatternMatcher(Importer& im) : im_(im), g_(im.graph().graph()) {}

    const onnx::NodeProto& node(int i) const { return g_.node(i); }
    // The one needed reader of `value` with op type `op` (and no other needed reader), or -1;
    // -1 also when `value` is the graph's output (a pattern's inner value never is).
    int only_reader(const std::string& value, const std::string& op) const {
        int found = -1;
        for (const int r : im_.graph().readers(value)) {
            if (!im_.graph().needed(r)) continue;
            if (found >= 0 || node(r).op_type() != op) return -1;
            found = r;
        }
        return value == im_.graph().output() ? -1 : found;
    }
    // The input of `n` other than `value` (binary ops), or "".
    std::string other(const onnx::NodeProto& n, const std::string& value) const {
        if (n.input_size() != 2) return "";
        if (n.input(0) == value) return n.input(1);
        if (n.input(1) == value) return n.input(0);
        return "";
    }
    // `value` when known at import: walked already, an initializer or a Constant node (later
    // in the graph than the pattern's first node, so not walked yet).
    std::optional<Known> constant(const std::string& value) const {
        if (const Known* k = im_.known(value)) return *k;
        const auto* t = im_.graph().initializer(value);
        if (t == nullptr) t = im_.graph().constant(value);
        if (t == nullptr) return std::nullopt;
        auto k = known_from_tensor(*t);
        if (!k) return std::nullopt;
        return *k;
    }
    // A known scalar (or one-element) value, as a double.
    std::optional<double> scalar(const std::string& value) const {
        const auto k = constant(value);
        if (!k || k->symbolic_dims || k->size() != 1) return std::nullopt;
        return k->is_float ? k->f[0] : static_cast<double>(k->i[0].value);
    }
    // A float initializer (a trained tensor).
    bool is_tensor(const std::string& value) const {
        const auto* t = im_.graph().initializer(value);
        return t != nullptr && t->data_type() == onnx::TensorProto::FLOAT;
    }
    // `value` as a slot binds it: a float initializer's tensor, else the psrun value.
    Result<std::string> slot(const std::string& value, const std::string& who) {
        const std::string t = im_.slot_tensor(value);
        if (!t.empty()) return t;
        return im_.data_value(value, who);
    }

    Importer& im_;
    const onnx::GraphProto& g_;
};

}  // namespace psrun::onnx_io
