// ONNX sequences of tensors (onnx_importer.h: import_sequence). torch.onnx writes a Python list
// of a scripted module as a sequence: `outs = []` SequenceEmpty, `outs.append(h)` SequenceInsert
// (in a Loop's body: a carried sequence, which unroll_loop turns into a chain of inserts),
// `torch.stack(outs, d)` ConcatFromSequence(new_axis=1), `torch.cat` the same without new_axis.
// One graph serves every batch, so every sequence is known at import as the list of its
// elements' ONNX names, and the nodes that read one become layers of the elements.
#include <string>
#include <vector>

#include "workerd/onnx/onnx_consts_ops.h"
#include "workerd/onnx/onnx_importer.h"

namespace psrun::onnx_io {

namespace {

// A position input known at import, made non-negative against `size` (`insert`: size itself is
// a position too); nullopt when absent; an error when out of range or unknown.
Result<std::optional<std::int64_t>> position(Importer& im, int i, int input, std::size_t size, bool insert) {
    const auto& node = im.graph().graph().node(i);
    if (node.input_size() <= input || node.input(input).empty()) return std::nullopt;
    const Known* k = im.known(node.input(input));
    const auto v = k != nullptr ? k->plain_ints() : std::nullopt;
    if (!v || v->size() != 1) return tl::unexpected(im.refuse(i, "its position must be known at import"));
    const auto n = static_cast<std::int64_t>(size);
    const std::int64_t p = v->front() < 0 ? v->front() + n : v->front();
    if (p < 0 || p > n || (!insert && p == n))
        return tl::unexpected(
            im.refuse(i, "position " + std::to_string(v->front()) + " is outside a sequence of " + std::to_string(n)));
    return p;
}

Result<std::vector<std::string>> input_sequence(Importer& im, int i) {
    const auto& node = im.graph().graph().node(i);
    const std::vector<std::string>* s = node.input_size() > 0 ? im.sequence(node.input(0)) : nullptr;
    if (s == nullptr) return tl::unexpected(im.refuse(i, "its input is no sequence the import knows"));
    return *s;
}

// ConcatFromSequence: the elements along `axis` (each unsqueezed there first with new_axis).
Result<void> concat_from_sequence(Importer& im, int i, const std::vector<std::string>& elements) {
    const auto& node = im.graph().graph().node(i);
    const std::string who = node_label(node, i);
    if (elements.empty()) return tl::unexpected(im.refuse(i, "it concatenates an empty sequence"));
    PSRUN_TRY_ASSIGN(auto axis, int_attr(node, "axis", 0));
    PSRUN_TRY_ASSIGN(auto new_axis, int_attr(node, "new_axis", 0));
    const nn::ValueInfo* first = im.info(elements.front());
    if (first == nullptr) return tl::unexpected(im.refuse(i, "its elements must be values of the graph"));
    const auto rank = static_cast<std::int64_t>(first->rank()) + (new_axis != 0 ? 1 : 0);
    if (axis < -rank || axis >= rank)
        return tl::unexpected(
            im.refuse(i, "axis " + std::to_string(axis) + " is outside rank " + std::to_string(rank)));
    if (axis < 0) axis += rank;
    const std::string base = node.name().empty() ? node.output(0) : node.name();
    std::vector<std::string> parts;
    for (std::size_t k = 0; k < elements.size(); ++k) {
        PSRUN_TRY_ASSIGN(auto v, im.data_value(elements[k], who));
        if (new_axis != 0) {
            PSRUN_TRY_ASSIGN(v, im.emit({{"kind", "unsqueeze"}, {"inputs", {v}}, {"axes", {axis}}},
                                        im.unique_name(base + "/element_" + std::to_string(k)), who));
        }
        parts.push_back(v);
    }
    if (parts.size() == 1) {
        im.bind(node.output(0), parts.front());
        return {};
    }
    PSRUN_TRY_ASSIGN(auto out,
                     im.emit({{"kind", "concat"}, {"inputs", parts}, {"axis", axis}}, im.unique_name(base), who));
    im.bind(node.output(0), out);
    return {};
}

}  // namespace

Result<bool> import_sequence(Importer& im, int i) {
    const auto& node = im.graph().graph().node(i);
    const std::string& op = node.op_type();
    if (node.output_size() < 1) return false;
    const std::string& out = node.output(0);
    if (op == "SequenceEmpty") {
        im.set_sequence(out, {});
    } else if (op == "SequenceConstruct") {
        im.set_sequence(out, {node.input().begin(), node.input().end()});
    } else if (op == "Identity" && node.input_size() == 1 && im.sequence(node.input(0)) != nullptr) {
        im.set_sequence(out, *im.sequence(node.input(0)));
    } else if (op == "SequenceInsert") {
        PSRUN_TRY_ASSIGN(auto s, input_sequence(im, i));
        if (node.input_size() < 2) return tl::unexpected(im.refuse(i, "it has no tensor to insert"));
        PSRUN_TRY_ASSIGN(auto at, position(im, i, 2, s.size(), true));
        s.insert(s.begin() + at.value_or(static_cast<std::int64_t>(s.size())), node.input(1));
        im.set_sequence(out, std::move(s));
    } else if (op == "SequenceAt") {
        PSRUN_TRY_ASSIGN(auto s, input_sequence(im, i));
        PSRUN_TRY_ASSIGN(auto at, position(im, i, 1, s.size(), false));
        if (!at) return tl::unexpected(im.refuse(i, "it has no position"));
        PSRUN_TRY_ASSIGN(auto v, im.data_value(s[static_cast<std::size_t>(*at)], node_label(node, i)));
        im.bind(out, v);
    } else if (op == "SequenceLength") {
        PSRUN_TRY_ASSIGN(auto s, input_sequence(im, i));
        im.set_known(out, make_ints({}, {nn::Dim{static_cast<std::int64_t>(s.size()), false}}));
    } else if (op == "ConcatFromSequence") {
        PSRUN_TRY_ASSIGN(auto s, input_sequence(im, i));
        PSRUN_TRY(concat_from_sequence(im, i, s));
    } else {
        return false;
    }
    return true;
}

}  // namespace psrun::onnx_io
