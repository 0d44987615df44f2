// pack_padded_sequence(enforce_sorted=False) as torch.onnx writes it (onnx_importer.h:
// import_sort_permutation): the [N] lengths sorted over the batch (TopK, k = N), the batch
// gathered in that order (Gather(x, indices, axis 0)) for the recurrent layers, whose
// sequence_lens are the sorted lengths, and their outputs gathered back by the inverse
// permutation (ScatterElements of Range(0, N) at the indices). The recurrent layers take any
// order of lengths (rnn_lengths_import.cpp) and every layer keeps the examples apart, so a
// permutation and its inverse cancel: the sorted lengths are the lengths, and each Gather by the
// permutation or its inverse along the batch axis passes its data through.
//
// Matched only as written: TopK over the batch axis of a rank-1 value; its sorted values read
// (through Casts) as sequence_lens of LSTM, GRU or RNN nodes and by nothing else; its indices read only by
// Casts, by shape arithmetic ending in the inverse, and by Gathers (of other values) along the
// batch axis. Anything else (a sort whose order the graph uses) is left to the importer, which
// refuses a TopK over the batch.
#include <set>
#include <string>
#include <vector>

#include "workerd/onnx/onnx_importer.h"

namespace psrun::onnx_io {

namespace {

constexpr const char* kPermutation = "batch_permutation";

// The recurrent nodes reading `value`, through Casts, as input 4 (sequence_lens); -1 when
// something else reads it.
int read_as_lengths(const GraphIndex& graph, const std::string& value, int depth = 0) {
    if (depth > 8) return -1;
    int count = 0;
    for (const int r : graph.readers(value)) {
        const auto& node = graph.graph().node(r);
        const std::string& op = node.op_type();
        if (op == "Cast") {
            const int more = read_as_lengths(graph, node.output(0), depth + 1);
            if (more < 0) return -1;
            count += more;
            continue;
        }
        if ((op != "LSTM" && op != "GRU" && op != "RNN") || node.input_size() < 5 || node.input(4) != value) return -1;
        for (int k = 0; k < node.input_size(); ++k)
            if (k != 4 && node.input(k) == value) return -1;
        ++count;
    }
    return count;
}

// A Gather whose indices are a noted permutation: its data passes through when it gathers
// along the data's batch axis.
Result<bool> pass_permuted_gather(Importer& importer, int i) {
    const auto& node = importer.graph().graph().node(i);
    if (node.op_type() != "Gather" || node.input_size() != 2) return false;
    const nlohmann::json* found = importer.note(node.input(1));
    if (found == nullptr || found->value("pattern", "") != kPermutation) return false;
    // A fill known at import (torch.zeros_like of a state) is the same in any order.
    const Known* fill = importer.known(node.input(0));
    const bool uniform = fill != nullptr && fill->symbolic_dims.has_value();
    const nn::ValueInfo* data = importer.info(node.input(0));
    std::int64_t axis = 0;
    for (const auto& a : node.attribute())
        if (a.name() == "axis") axis = a.i();
    if (data != nullptr && axis < 0) axis += static_cast<std::int64_t>(data->rank());
    if (!uniform && (data == nullptr || axis < 0 || axis >= static_cast<std::int64_t>(data->rank()) ||
                     !data->dims[static_cast<std::size_t>(axis)].batch))
        return tl::unexpected(importer.refuse(
            i, "it gathers by the batch's sort order (pack_padded_sequence) along an axis that is not the batch"));
    PSRUN_TRY_ASSIGN(auto value, importer.data_value(node.input(0), node_label(node, i)));
    importer.bind(node.output(0), value);
    importer.consume(i);
    return true;
}

}  // namespace

Result<bool> import_sort_permutation(Importer& importer, int i) {
    if (auto passed = pass_permuted_gather(importer, i); !passed || *passed) return passed;
    const GraphIndex& graph = importer.graph();
    const auto& nodes = graph.graph().node();
    const auto& top_k = nodes[i];
    if (top_k.op_type() != "TopK" || top_k.output_size() < 2 || top_k.input_size() < 1) return false;
    const nn::ValueInfo* lengths = importer.info(top_k.input(0));
    if (lengths == nullptr || lengths->rank() != 1 || !lengths->dims[0].batch) return false;
    if (read_as_lengths(graph, top_k.output(0)) < 1) return false;
    // Forward from the indices: values computed from them and constants alone (the casts, the
    // inverse and its shape arithmetic) are consumed; Gathers of other data by them pass it
    // through when reached; any other reader ends the match.
    std::set<std::string> derived = {top_k.output(1)}, fixed;
    auto constant = [&](const std::string& v) {
        return v.empty() || graph.initializer(v) != nullptr || graph.constant(v) != nullptr || fixed.count(v) != 0 ||
               importer.known(v) != nullptr;
    };
    std::vector<int> consumed;
    std::vector<std::string> indices;  // the permutations Gathers read
    for (int j = i + 1; j < nodes.size(); ++j) {
        const auto& node = nodes[j];
        bool reads = false, other = false;
        for (const auto& in : node.input()) {
            if (derived.count(in) != 0) reads = true;
            else if (!constant(in)) other = true;
        }
        if (!reads) {
            if (!other)
                for (const auto& out : node.output()) fixed.insert(out);
            continue;
        }
        if (node.op_type() == "Gather" && node.input_size() == 2 && derived.count(node.input(0)) == 0 &&
            derived.count(node.input(1)) != 0) {
            indices.push_back(node.input(1));
            continue;
        }
        if (other) return false;
        consumed.push_back(j);
        for (const auto& out : node.output()) derived.insert(out);
    }
    if (indices.empty()) return false;
    PSRUN_TRY_ASSIGN(auto sorted, importer.data_value(top_k.input(0), node_label(top_k, i)));
    importer.bind(top_k.output(0), sorted);
    importer.consume(i);
    for (const int j : consumed) importer.consume(j);
    for (const auto& v : indices) importer.note(v, {{"pattern", kPermutation}});
    return true;
}

}  // namespace psrun::onnx_io
