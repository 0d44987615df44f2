// untie_merged_initializers (onnx_merged_initializers.h): one pass over the nodes to count each
// value's readers, one to replace the Identity nodes, then the graph's nodes compacted in order.
#include "workerd/onnx/onnx_merged_initializers.h"

#include <map>
#include <set>
#include <string_view>

namespace psrun::onnx_io {

std::vector<std::pair<std::string, std::string>> untie_merged_initializers(onnx::GraphProto& graph) {
    std::map<std::string_view, int> initializer_at;
    for (int i = 0; i < graph.initializer_size(); ++i) initializer_at.emplace(graph.initializer(i).name(), i);
    std::set<std::string_view> boundary;  // graph inputs and outputs
    for (const auto& v : graph.input()) boundary.insert(v.name());
    for (const auto& v : graph.output()) boundary.insert(v.name());
    // Readers of each initializer other than an Identity node.
    std::map<std::string_view, int> other_readers;
    for (const auto& n : graph.node())
        if (n.op_type() != "Identity" || !n.domain().empty())
            for (const auto& in : n.input()) ++other_readers[in];
    std::vector<std::pair<std::string, int>> copies;  // (name, source initializer index)
    std::vector<bool> drop(static_cast<std::size_t>(graph.node_size()), false);
    std::set<std::string_view> made;
    for (int i = 0; i < graph.node_size(); ++i) {
        const auto& n = graph.node(i);
        if (n.op_type() != "Identity" || !n.domain().empty() || n.input_size() != 1 || n.output_size() != 1) continue;
        const auto source = initializer_at.find(n.input(0));
        if (source == initializer_at.end() || other_readers[n.input(0)] == 0) continue;
        if (graph.initializer(source->second).data_type() != onnx::TensorProto::FLOAT) continue;
        const std::string& out = n.output(0);
        if (out.empty() || initializer_at.count(out) != 0 || boundary.count(out) != 0 || made.count(out) != 0) continue;
        made.insert(out);
        copies.emplace_back(out, source->second);
        drop[static_cast<std::size_t>(i)] = true;
    }
    std::vector<std::pair<std::string, std::string>> untied;
    if (copies.empty()) return untied;
    for (const auto& [name, from] : copies) {
        untied.emplace_back(name, graph.initializer(from).name());
        onnx::TensorProto copy = graph.initializer(from);
        copy.set_name(name);
        *graph.add_initializer() = std::move(copy);
    }
    int kept = 0;
    for (int i = 0; i < graph.node_size(); ++i)
        if (!drop[static_cast<std::size_t>(i)]) graph.mutable_node()->SwapElements(kept++, i);
    graph.mutable_node()->DeleteSubrange(kept, graph.node_size() - kept);
    return untied;
}

std::string merged_initializers_warning(const std::vector<std::pair<std::string, std::string>>& untied) {
    if (untied.empty()) return {};
    std::string listed;
    constexpr std::size_t kShown = 4;
    for (std::size_t i = 0; i < untied.size() && i < kShown; ++i)
        listed += (i == 0 ? "" : ", ") + untied[i].first + " = Identity(" + untied[i].second + ")";
    if (untied.size() > kShown) listed += " and " + std::to_string(untied.size() - kShown) + " more";
    return std::to_string(untied.size()) + " initializer" + (untied.size() == 1 ? "" : "s") + " (" + listed +
           ") written as another initializer of equal values: torch.onnx's eval-mode export (its default) merges "
           "parameters and buffers whose values are equal (a fresh module's LayerNorm weights, a BatchNorm's "
           "running mean and its bias), which would train them as one tensor; psrun trains each as its own, "
           "starting from those values. Export in training mode (python/psrun_torch.py, or "
           "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False) to write each as itself";
}

}  // namespace psrun::onnx_io
