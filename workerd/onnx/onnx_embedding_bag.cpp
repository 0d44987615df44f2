// nn.EmbeddingBag as torch.onnx writes it (onnx_importer.h: claim_embedding_bags and
// import_embedding_bag). For ids x [N, L] (each row a bag) torch 1.13 writes
//   R = Reshape(x, [-1]); offsets = Range(0, N * L, L) and the trip count from Shape(x)
//   Loop over the bags, body: Slice(R, offsets[i], offsets[i + 1]) -> Gather(W, .)
//                             [-> Mul by Unsqueeze(Slice(Reshape(w, [-1]), ...)), per_sample_weights]
//                             -> ReduceSum | ReduceMean | ReduceMax over axis 0 (the bag's rows)
// which is embedding(x) [N, L, D] (times w [N, L, 1]) reduced over axis 1: no loop at run time.
// The claim consumes the nodes that only compute the offsets and the trip count (the Range of
// N * L would otherwise be refused) and notes the Loop; the walk imports the noted Loop as an
// embedding and a reduce. A Loop of any other form is refused naming it.
#include <string>

#include "workerd/onnx/onnx_importer.h"

namespace psrun::onnx_io {

namespace {

// The node of `g` producing `value` (nullptr: none in g).
const onnx::NodeProto* producer_in(const onnx::GraphProto& g, const std::string& value) {
    for (const auto& n : g.node())
        for (const auto& out : n.output())
            if (out == value) return &n;
    return nullptr;
}

// The outer value Reshape(v, [-1]) flattens, when `flat` is that (else "").
std::string flattened(const Importer& im, const std::string& flat) {
    const int p = im.graph().producer(flat);
    if (p < 0) return "";
    const auto& reshape = im.graph().graph().node(p);
    if (reshape.op_type() != "Reshape" || reshape.input_size() < 2) return "";
    const Known* shape = im.known(reshape.input(1));
    const auto* init = im.graph().initializer(reshape.input(1));
    const auto* constant = im.graph().constant(reshape.input(1));
    std::optional<std::vector<std::int64_t>> target;
    if (shape != nullptr) target = shape->plain_ints();
    else if (init != nullptr || constant != nullptr) {
        auto read = read_ints(init != nullptr ? *init : *constant);
        if (read) target = *read;
    }
    if (!target || *target != std::vector<std::int64_t>{-1}) return "";
    return reshape.input(0);
}

void match_bag(Importer& im, int loop_index) {
    const auto& g = im.graph();
    const auto& loop = g.graph().node(loop_index);
    const auto* body_attr = find_attribute(loop, "body");
    if (body_attr == nullptr || !body_attr->has_g() || loop.output_size() != 1 || loop.input_size() != 2) return;
    const auto& body = body_attr->g();
    if (body.input_size() != 2 || body.output_size() != 2) return;
    const auto* reduce = producer_in(body, body.output(1).name());
    if (reduce == nullptr) return;
    const std::string& op = reduce->op_type();
    const char* mode = op == "ReduceSum" ? "sum" : op == "ReduceMean" ? "mean" : op == "ReduceMax" ? "max" : nullptr;
    if (mode == nullptr) return;
    auto keep = int_attr(*reduce, "keepdims", 1);
    if (!keep || *keep != 0) return;
    const auto* rows = producer_in(body, reduce->input(0));
    std::string weights;
    if (rows != nullptr && rows->op_type() == "Mul" && std::string(mode) == "sum") {  // per_sample_weights
        const auto* unsq = producer_in(body, rows->input(1));
        const auto* slice =
            unsq != nullptr && unsq->op_type() == "Unsqueeze" ? producer_in(body, unsq->input(0)) : nullptr;
        if (slice == nullptr || slice->op_type() != "Slice") return;
        weights = flattened(im, slice->input(0));
        if (weights.empty()) return;
        rows = producer_in(body, rows->input(0));
    }
    if (rows == nullptr || rows->op_type() != "Gather" || rows->input_size() != 2) return;
    const auto* table = g.initializer(rows->input(0));
    if (table == nullptr || table->data_type() != onnx::TensorProto::FLOAT || table->dims_size() != 2) return;
    const auto* slice = producer_in(body, rows->input(1));
    if (slice == nullptr || slice->op_type() != "Slice") return;
    const std::string ids = flattened(im, slice->input(0));
    if (ids.empty()) return;

    // Consume what only the Loop reads (its inputs and the outer values its body reads), never
    // the ids' or the weights' producers.
    std::set<std::string> wanted(loop.input().begin(), loop.input().end());
    std::set<std::string> made_inside;
    for (const auto& n : body.node()) made_inside.insert(n.output().begin(), n.output().end());
    for (const auto& in : body.input()) made_inside.insert(in.name());
    for (const auto& n : body.node())
        for (const auto& in : n.input())
            if (!in.empty() && made_inside.count(in) == 0) wanted.insert(in);
    std::set<int> consumed{loop_index};
    const std::set<int> keep_nodes{g.producer(ids), weights.empty() ? -1 : g.producer(weights)};
    for (int j = loop_index - 1; j >= 0; --j) {
        if (keep_nodes.count(j) != 0 || !g.needed(j) || im.consumed(j)) continue;
        const auto& n = g.graph().node(j);
        bool read = false, only_here = true;
        for (const auto& out : n.output()) {
            if (out.empty()) continue;
            read = read || wanted.count(out) != 0;
            for (const int r : g.readers(out)) only_here = only_here && consumed.count(r) != 0;
            const auto& outs = g.outputs();
            only_here = only_here && std::find(outs.begin(), outs.end(), out) == outs.end();
        }
        if (!read || !only_here) continue;
        consumed.insert(j);
        wanted.insert(n.input().begin(), n.input().end());
    }
    consumed.erase(loop_index);
    for (const int j : consumed) im.consume(j);
    im.note(loop.output(0), {{"pattern", "pytorch_embedding_bag"},
                             {"mode", mode},
                             {"ids", ids},
                             {"weights", weights},
                             {"table", im.slot_tensor(rows->input(0))},
                             {"vocabulary", table->dims(0)},
                             {"dim", table->dims(1)}});
}

bool noted_bag(const Importer& importer, const onnx::NodeProto& loop) {
    const nlohmann::json* note = loop.output_size() == 1 ? importer.note(loop.output(0)) : nullptr;
    return note != nullptr && note->value("pattern", "") == "pytorch_embedding_bag";
}

}  // namespace

Result<void> claim_embedding_bags(Importer& importer) {
    const auto& nodes = importer.graph().graph();
    for (int i = 0; i < nodes.node_size(); ++i)
        if (nodes.node(i).op_type() == "Loop" && importer.graph().needed(i)) match_bag(importer, i);
    return {};
}

Result<bool> import_embedding_bag(Importer& importer, int i) {
    const auto& loop = importer.graph().graph().node(i);
    if (loop.op_type() != "Loop" || !noted_bag(importer, loop)) return false;
    const nlohmann::json* note = importer.note(loop.output(0));
    const std::string who = node_label(loop, i);
    PSRUN_TRY_ASSIGN(auto ids, importer.data_value(note->at("ids").get<std::string>(), who));
    const nn::ValueInfo* info = importer.info(note->at("ids").get<std::string>());
    if (info == nullptr || info->type != nn::ElementType::kInt || info->rank() != 2)
        return tl::unexpected(importer.refuse(
            i,
            "nn.EmbeddingBag reads its bags as the rows of int ids [N, L]; ids with offsets (a 1-D input) make "
            "bags of sizes the data decides"));
    PSRUN_TRY_ASSIGN(auto rows, importer.emit({{"kind", "embedding"},
                                               {"inputs", {ids}},
                                               {"vocabulary", note->at("vocabulary")},
                                               {"dim", note->at("dim")},
                                               {"tensors", {{"table", note->at("table")}}}},
                                              loop.name() + "/embedding", who));
    const std::string weights = note->at("weights").get<std::string>();
    if (!weights.empty()) {
        PSRUN_TRY_ASSIGN(auto w, importer.data_value(weights, who));
        PSRUN_TRY_ASSIGN(auto column, importer.emit({{"kind", "unsqueeze"}, {"inputs", {w}}, {"axes", {2}}},
                                                    loop.name() + "/w", who));
        PSRUN_TRY_ASSIGN(auto weighted,
                         importer.emit({{"kind", "mul"}, {"inputs", {rows, column}}}, loop.name() + "/weighted", who));
        rows = weighted;
    }
    const std::string mode = note->at("mode").get<std::string>();
    PSRUN_TRY_ASSIGN(auto bag, importer.emit({{"kind", mode == "sum"    ? "reduce_sum"
                                                       : mode == "mean" ? "reduce_mean"
                                                                        : "reduce_max"},
                                              {"inputs", {rows}},
                                              {"axes", {1}},
                                              {"keepdims", false}},
                                             loop.name().empty() ? "embedding_bag" : loop.name(), who));
    importer.bind(loop.output(0), bag);
    return true;
}

}  // namespace psrun::onnx_io
