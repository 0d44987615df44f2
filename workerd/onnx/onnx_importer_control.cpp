// The walk at an If or a Loop (onnx_importer.h: import_if, import_loop): what to inline or unroll
// (onnx_inline_if.h), decided from what is known at import.
#include <set>
#include <string>
#include <vector>

#include "workerd/onnx/onnx_importer.h"

namespace psrun::onnx_io {

namespace {

// Most iterations a Loop unrolls to, and most nodes the graph holds then (nested Loops included).
constexpr std::int64_t kMaxUnrolledTrips = 4096, kMaxUnrolledNodes = 200000;

}  // namespace

Result<void> Importer::import_if(int i) {
    const Known* cond = known(graph_.graph().node(i).input(0));
    if (cond == nullptr) {  // computed from the data: both branches, then a Where
        static_if_ = StaticIf{i, true, true};
        return {};
    }
    if (cond->size() != 1)
        return tl::unexpected(
            refuse(i, "its condition holds " + std::to_string(cond->size()) + " values where an If takes one"));
    bool taken = false;
    if (cond->is_float) {
        taken = cond->f.front() != 0.0;
    } else {
        const auto ints = cond->plain_ints();
        if (!ints)
            return tl::unexpected(refuse(i,
                                         "its condition depends on the batch size, which the engine does not "
                                         "know at import: one graph serves every batch"));
        taken = ints->front() != 0;
    }
    static_if_ = StaticIf{i, taken};
    return {};
}

Result<void> Importer::import_loop(int i) {
    PSRUN_TRY_ASSIGN(auto bag, import_embedding_bag(*this, i));
    if (bag) return {};
    const onnx::NodeProto& loop = graph_.graph().node(i);
    const std::string advice =
        ": the engine trains one graph of fixed layers, so a Loop imports only when it runs a number of times "
        "known at import (a loop over range(x.size(1)) in a scripted module) and its condition stays true (no "
        "break); unroll it in Python, or give nn.EmbeddingBag [N, L] ids instead of 1-D ids and offsets";
    // A known number of times (not the batch size's multiple).
    const Known* trips = loop.input_size() > 0 && !loop.input(0).empty() ? known(loop.input(0)) : nullptr;
    const auto count = trips != nullptr ? trips->plain_ints() : std::nullopt;
    if (!count || count->size() != 1)
        return tl::unexpected(refuse(i, "its trip count is not known at import" + advice));
    // A condition true on entry and after each iteration: absent or true, and the body's
    // condition output its condition input or a value known true.
    const auto known_true = [this](const std::string& v) {
        const Known* k = known(v);
        const auto ints = k != nullptr && !k->is_float ? k->plain_ints() : std::nullopt;
        return k != nullptr && k->size() == 1 && (k->is_float ? k->f.front() != 0.0 : ints && ints->front() != 0);
    };
    if (loop.input_size() > 1 && !loop.input(1).empty() && !known_true(loop.input(1)))
        return tl::unexpected(refuse(i, "its condition is not known to be true at import" + advice));
    const auto* body = find_attribute(loop, "body");
    if (body == nullptr || !body->has_g()) return tl::unexpected(refuse(i, "it has no graph attribute 'body'"));
    const onnx::GraphProto& g = body->g();
    if (g.input_size() < 2 || g.output_size() < 1)
        return tl::unexpected(refuse(i, "its body has no iteration number and condition inputs"));
    std::string cond_out = g.output(0).name();
    for (int k = g.node_size() - 1; k >= 0; --k) {  // through Identity nodes (torch: of an outer constant)
        const auto& n = g.node(k);
        if (n.op_type() == "Identity" && n.input_size() == 1 && n.output_size() == 1 && n.output(0) == cond_out)
            cond_out = n.input(0);
    }
    if (cond_out != g.input(1).name() && !known_true(cond_out))
        return tl::unexpected(refuse(i, "its body computes its condition (a while loop or a break)" + advice));
    const std::int64_t m = count->front();
    if (m < 1 || m > kMaxUnrolledTrips || graph_.graph().node_size() + m * g.node_size() > kMaxUnrolledNodes)
        return tl::unexpected(refuse(i, "it runs " + std::to_string(m) + " times; it unrolls from 1 to " +
                                            std::to_string(kMaxUnrolledTrips) + " times, the graph then up to " +
                                            std::to_string(kMaxUnrolledNodes) + " nodes"));
    loop_unroll_ = LoopUnroll{i, m, opset_};
    return {};
}

Error Importer::blame_loop(int i, Error error) const {
    const auto& nodes = graph_.graph();
    for (int l = i + 1; l < nodes.node_size(); ++l) {
        const auto& loop = nodes.node(l);
        if (loop.op_type() != "Loop" || !graph_.needed(l) || loop.input_size() == 0 || loop.input(0).empty()) continue;
        if (loop.output_size() == 1 && note(loop.output(0)) != nullptr) continue;  // nn.EmbeddingBag's
        std::vector<std::string> todo = {loop.input(0)};  // does node i compute the trip count?
        std::set<std::string> seen;
        while (!todo.empty()) {
            const std::string v = todo.back();
            todo.pop_back();
            if (v.empty() || !seen.insert(v).second) continue;
            const int p = graph_.producer(v);
            if (p == i)
                return refuse(l, "its trip count is computed from the data (" + error.message +
                                     "): the engine trains one graph of fixed layers, so a Loop imports only when it "
                                     "runs a number of times known at import; nn.EmbeddingBag reads its bags as the "
                                     "rows of [N, L] ids, not as 1-D ids and offsets");
            if (p >= 0) todo.insert(todo.end(), nodes.node(p).input().begin(), nodes.node(p).input().end());
        }
    }
    return error;
}

}  // namespace psrun::onnx_io
