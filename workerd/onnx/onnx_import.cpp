// import_onnx (onnx_model.h): the file parsed, its opset and graph checked (onnx_graph.h),
// then the graph walked by the Importer (onnx_importer.h), again after each If whose condition
// the walk knows is inlined (onnx_inline_if.h). A file psrun exported carries its
// own description (kDescriptionKey): when every tensor it names is an initializer of the same
// shape and the graph still has the digest recorded with it (kGraphDigestKey: not edited since), that description
// (dropout, names, loss, recipe) is the result, so a round trip keeps the architecture hash. The recipe a run used
// (kRecipeKey, which `psrun export` copies from the model dir's recipe.json) then replaces the model's own recipe, so
// that training the exported file again follows the run it came from (command-line options and --recipe still win).
#include <climits>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "workerd/nn/model_summary.h"
#include "workerd/nn/recipe.h"
#include "workerd/onnx/onnx_graph_digest.h"
#include "workerd/onnx/onnx_importer.h"
#include "workerd/onnx/onnx_model.h"

namespace psrun::onnx_io {

namespace {

// Largest file read: protobuf's own limit.
constexpr std::uintmax_t kMaxOnnxBytes = INT_MAX;

Result<std::int64_t> default_opset(const onnx::ModelProto& proto) {
    for (const auto& o : proto.opset_import()) {
        if (!o.domain().empty() && o.domain() != "ai.onnx") continue;
        if (o.version() < kMinImportOpset || o.version() > kMaxImportOpset)
            return make_error(
                ErrorCode::kInvalidArgument,
                "opset " + std::to_string(o.version()) + ": the importer reads opsets " +
                    std::to_string(kMinImportOpset) + " to " + std::to_string(kMaxImportOpset) +
                    " (torch.onnx.export(..., opset_version=17), or convert the model with onnx.version_converter)");
        return o.version();
    }
    return make_error(ErrorCode::kInvalidArgument, "no opset_import of the default ONNX domain");
}

std::string stem(std::string_view source) {
    std::string name = std::filesystem::path(std::string(source)).stem().string();
    return name.empty() ? "onnx" : name;
}

}  // namespace

namespace {

// The graph digest a psrun export recorded (kGraphDigestKey), if any.
const std::string* recorded_digest(const onnx::ModelProto& proto) {
    for (const auto& meta : proto.metadata_props())
        if (meta.key() == kGraphDigestKey) return &meta.value();
    return nullptr;
}

// A psrun export's recorded description, when every tensor it names is an initializer of the
// same shape and the graph is the one it was exported with (its digest, when recorded, matches:
// exports before the digest have none and are trusted as before); its initial parameters from
// them. `edited` is set when a digest was recorded and the graph no longer matches it.
std::optional<nn::ModelDescription> recorded_description(const onnx::ModelProto& proto, const GraphIndex& graph,
                                                         std::string_view source, bool& edited) {
    for (const auto& meta : proto.metadata_props()) {
        if (meta.key() != kDescriptionKey) continue;
        auto model = nn::parse_model_text(meta.value(), source);
        if (!model) return std::nullopt;
        if (const std::string* digest = recorded_digest(proto)) {
            std::set<std::string> parameters;
            for (const auto& t : model->tensors) parameters.insert(t.name);
            if (*digest != graph_digest(proto.graph(), parameters)) {
                edited = true;
                return std::nullopt;
            }
        }
        std::vector<float> params(static_cast<std::size_t>(model->parameter_count));
        for (const auto& t : model->tensors) {
            const auto* init = graph.initializer(t.name);
            if (init == nullptr || std::vector<std::int64_t>(init->dims().begin(), init->dims().end()) != t.shape)
                return std::nullopt;
            auto values = read_floats(*init);
            if (!values || static_cast<std::int64_t>(values->size()) != t.size) return std::nullopt;
            std::copy(values->begin(), values->end(), params.begin() + t.offset);
        }
        model->initial_parameters = std::make_shared<const std::vector<float>>(std::move(params));
        return std::move(*model);
    }
    return std::nullopt;
}

// The run's recipe recorded under kRecipeKey, when the file has one. A damaged entry is refused
// (kInvalidArgument naming the entry and the field): a run that cannot read its own recipe would
// silently train with another.
Result<std::optional<nn::Recipe>> recorded_run_recipe(const onnx::ModelProto& proto, std::string_view source) {
    for (const auto& meta : proto.metadata_props()) {
        if (meta.key() != kRecipeKey) continue;
        PSRUN_TRY_ASSIGN(auto recipe, nn::parse_recipe_text(
                                          meta.value(), "model " + std::string(source) + ": metadata " + kRecipeKey));
        return std::optional<nn::Recipe>(std::move(recipe));
    }
    return std::optional<nn::Recipe>();
}

// The initializers the file's kFrozenKey metadata lists: float initializers to import as
// constants. Errors name the entry.
Result<std::set<std::string>> frozen_initializers(const onnx::ModelProto& proto, std::string_view source) {
    std::set<std::string> frozen;
    for (const auto& meta : proto.metadata_props()) {
        if (meta.key() != kFrozenKey) continue;
        const std::string where = "model " + std::string(source) + ": metadata " + kFrozenKey;
        const auto list = nlohmann::json::parse(meta.value(), nullptr, false);
        if (!list.is_array())
            return make_error(ErrorCode::kInvalidArgument,
                              where + ": expected a JSON list of initializer names, e.g. [\"pe\"]");
        std::map<std::string_view, const onnx::TensorProto*> initializers;
        for (const auto& t : proto.graph().initializer()) initializers[t.name()] = &t;
        for (const auto& name : list) {
            const auto it = name.is_string() ? initializers.find(name.get<std::string>()) : initializers.end();
            if (it == initializers.end() || it->second->data_type() != onnx::TensorProto::FLOAT)
                return make_error(ErrorCode::kInvalidArgument,
                                  where + ": " + name.dump() + " is not a float initializer of the graph");
            frozen.insert(name.get<std::string>());
        }
    }
    return frozen;
}

// The names of the graph's initializers (views into `proto`).
std::set<std::string_view> initializer_names(const onnx::ModelProto& proto) {
    std::set<std::string_view> names;
    for (const auto& t : proto.graph().initializer()) names.insert(t.name());
    return names;
}

// PyTorch's exporter names a tensor it computed by constant folding "onnx::<Op>_<n>" after the
// node that reads it. A convolution's weight of that name was computed, not a module parameter:
// an eval-mode export (torch.onnx.export's default, training=TrainingMode.EVAL) folds each
// BatchNormalization into the convolution before it (and drops Dropout), and constant folding
// merges a weight_norm or any other weight computation the same way. The engine then trains
// the folded tensors, without the batch norms. One warning naming the folded weights, or none.
std::vector<std::string> folded_weight_warnings(const onnx::ModelProto& proto) {
    const auto initializers = initializer_names(proto);
    std::vector<std::string> folded;
    for (const auto& node : proto.graph().node()) {
        if (node.op_type() != "Conv" && node.op_type() != "ConvTranspose") continue;
        if (node.input_size() < 2 || !initializers.contains(node.input(1))) continue;
        if (node.input(1).rfind("onnx::", 0) == 0) folded.push_back(node.input(1));
    }
    if (folded.empty()) return {};
    std::string names = folded.front();
    if (folded.size() > 1) names += " and " + std::to_string(folded.size() - 1) + " more";
    const bool one = folded.size() == 1;
    return {std::to_string(folded.size()) + " convolution weight" + (one ? "" : "s") + " (" + names + ") " +
            (one ? "was" : "were") +
            " computed by the exporter's constant folding, not read from the module's parameters: an eval-mode "
            "export (torch.onnx.export's default) folds each BatchNormalization into the convolution before it and "
            "drops Dropout, and folding merges computed weights (weight_norm), so the engine trains the folded "
            "tensors without them; export with training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False "
            "to train the module as written (docs/models.md \"Importing from PyTorch\")"};
}

// "'a'" or "'a' and 3 more": the nodes a warning names. REQUIRES: !names.empty().
std::string first_and_count(const std::vector<std::string>& names) {
    std::string text = "'" + names.front() + "'";
    if (names.size() > 1) text += " and " + std::to_string(names.size() - 1) + " more";
    return text;
}

// A node's name for a warning: its name, else its first output.
std::string node_name(const onnx::NodeProto& node) { return node.name().empty() ? node.output(0) : node.name(); }

// torch.onnx before PyTorch 2.0 writes F.pad(x, (l, r), mode="circular") (and a conv's
// padding_mode="circular") along an axis as Concat(x[-(r + 1):-1], x, x[0:l]) where PyTorch pads
// with x[-l:] and x[:r] (pytorch/pytorch#86690, fixed in 2.0): the file then computes another
// function than the module. psrun trains what the file says; one warning naming such Concats.
std::vector<std::string> circular_pad_warnings(const onnx::ModelProto& proto) {
    const auto& graph = proto.graph();
    std::map<std::string_view, const onnx::TensorProto*> constants;
    for (const auto& t : graph.initializer()) constants[t.name()] = &t;
    std::map<std::string_view, const onnx::NodeProto*> producers;
    for (const auto& node : graph.node()) {
        for (const auto& out : node.output()) producers[out] = &node;
        if (node.op_type() == "Constant" && node.output_size() == 1)
            for (const auto& a : node.attribute())
                if (a.name() == "value" && a.has_t()) constants[node.output(0)] = &a.t();
    }
    auto one_int = [&constants](const std::string& name) -> std::optional<std::int64_t> {
        const auto it = constants.find(name);
        if (it == constants.end()) return std::nullopt;
        auto v = read_ints(*it->second);
        if (!v || v->size() != 1) return std::nullopt;
        return v->front();
    };
    // Slice(of, [start], [end], [axis]) with no steps other than 1: {start, end}.
    auto slice_of = [&](const std::string& value, const std::string& of,
                        std::int64_t axis) -> std::optional<std::pair<std::int64_t, std::int64_t>> {
        const auto it = producers.find(value);
        if (it == producers.end()) return std::nullopt;
        const auto& n = *it->second;
        if (n.op_type() != "Slice" || n.input_size() < 4 || n.input(0) != of) return std::nullopt;
        if (n.input_size() > 4 && !n.input(4).empty() && one_int(n.input(4)) != std::int64_t{1}) return std::nullopt;
        const auto start = one_int(n.input(1)), end = one_int(n.input(2)), a = one_int(n.input(3));
        if (!start || !end || a != axis) return std::nullopt;
        return std::pair{*start, *end};
    };
    std::vector<std::string> found;
    for (const auto& node : graph.node()) {
        if (node.op_type() != "Concat" || node.input_size() != 3) continue;
        std::int64_t axis = 0;
        for (const auto& a : node.attribute())
            if (a.name() == "axis") axis = a.i();
        const std::string& x = node.input(1);
        const auto left = slice_of(node.input(0), x, axis), right = slice_of(node.input(2), x, axis);
        if (left && right && left->second == -1 && left->first < -1 && right->first == 0 && right->second > 0)
            found.push_back(node_name(node));
    }
    if (found.empty()) return {};
    return {"Concat " + first_and_count(found) +
            " pads circularly as torch.onnx before PyTorch 2.0 writes F.pad(mode='circular') and "
            "padding_mode='circular' (pytorch/pytorch#86690): it reads x[-(r+1):-1] before x and x[0:l] after it, "
            "where PyTorch pads with x[-l:] and x[:r], so the file computes another function than the module and "
            "psrun trains what the file says; export with PyTorch >= 2.0, or write the padding as "
            "torch.cat([x[..., -l:], x, x[..., :r]], dim)"};
}

// torch.onnx writes BatchNorm's momentum m as ONNX momentum 1 - m, and momentum=None (a
// cumulative average over every batch so far) as 0, which reads as m = 1: running statistics that
// are the last batch's alone. One warning naming such nodes.
std::vector<std::string> batch_norm_momentum_warnings(const onnx::ModelProto& proto) {
    std::vector<std::string> found;
    for (const auto& node : proto.graph().node()) {
        if (node.op_type() != "BatchNormalization") continue;
        for (const auto& a : node.attribute())
            if (a.name() == "momentum" && a.f() == 0.0f) found.push_back(node_name(node));
    }
    if (found.empty()) return {};
    return {"BatchNormalization " + first_and_count(found) +
            " has momentum 0, as torch.onnx writes BatchNorm(momentum=None) (a cumulative average of every batch's "
            "statistics) and momentum=1: psrun's running statistics are then the last batch's alone; give the module "
            "a momentum (0.1 is PyTorch's default) before exporting, or recompute the statistics after training"};
}

// For a refusal: what to do when the file's first input has a fixed batch size, as
// torch.onnx.export writes it without dynamic_axes. The shapes PyTorch computed from the batch
// (x.view(x.size(0), -1), attention's reshapes) are then constants of that size, which an
// engine training other batch sizes cannot read back (with a batch of 1 they cannot even be told
// from other axes of size 1). Empty when the batch axis is symbolic.
std::string fixed_batch_hint(const onnx::ModelProto& proto) {
    const auto initializers = initializer_names(proto);
    for (const auto& input : proto.graph().input()) {
        if (initializers.contains(input.name())) continue;
        if (!input.type().has_tensor_type() || input.type().tensor_type().shape().dim_size() == 0) return {};
        const auto& batch = input.type().tensor_type().shape().dim(0);
        if (!batch.has_dim_value()) return {};
        return " (the file's input '" + input.name() + "' has a fixed batch size of " +
               std::to_string(batch.dim_value()) +
               ": exported without dynamic_axes, its shapes computed from the batch are constants of that size; "
               "export with input_names=['x'], output_names=['logits'], dynamic_axes={'x': {0: 'N'}, 'logits': "
               "{0: 'N'}}, an entry for each input and output: docs/models.md \"Importing from PyTorch\")";
    }
    return {};
}

}  // namespace

Result<nn::ModelDescription> import_onnx(std::string_view bytes, std::string_view source_name) {
    const std::string prefix = "model " + std::string(source_name) + ": ";
    auto fail = [&prefix](const Error& e) { return make_error(ErrorCode::kInvalidArgument, prefix + e.message); };
    onnx::ModelProto proto;
    if (bytes.size() > kMaxOnnxBytes || !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
        return make_error(
            ErrorCode::kInvalidArgument,
            prefix + "not an ONNX model (the protobuf does not parse: a truncated file or another format)");
    if (!proto.has_graph() || proto.graph().node_size() == 0)
        return make_error(ErrorCode::kInvalidArgument, prefix + "not an ONNX model (no graph or no nodes)");
    auto opset = default_opset(proto);
    if (!opset) return fail(opset.error());
    auto graph = GraphIndex::build(proto.graph(), *opset);
    if (!graph) return fail(graph.error());
    PSRUN_TRY_ASSIGN(auto run_recipe, recorded_run_recipe(proto, source_name));
    PSRUN_TRY_ASSIGN(auto frozen, frozen_initializers(proto, source_name));
    auto with_run_recipe = [&](nn::ModelDescription model) {
        if (run_recipe) model.recipe = *run_recipe;
        return model;
    };
    bool edited = false;
    if (auto recorded = recorded_description(proto, *graph, source_name, edited))
        return with_run_recipe(std::move(*recorded));
    std::string origin = "imported from ONNX (" + proto.producer_name() + " " + proto.producer_version() + ")";
    if (edited)
        origin +=
            "; the graph was edited after psrun exported it, so its recorded description (layer names, "
            "dropout, loss) was set aside for what the graph computes";
    // Each If whose condition the walk finds known is inlined in a copy of the graph, and the
    // walk starts again on the copy.
    std::optional<onnx::GraphProto> rewritten;
    for (int inlined = 0;; ++inlined) {
        std::optional<GraphIndex> index;
        if (rewritten) {
            auto built = GraphIndex::build(*rewritten, *opset);
            if (!built) return fail(built.error());
            index = std::move(*built);
        }
        Importer importer(index ? *index : *graph, *opset, std::string(source_name), frozen);
        auto outcome = importer.run(stem(source_name), origin);
        if (!outcome) {
            Error e = outcome.error();
            e.message += fixed_batch_hint(proto);
            if (e.message.rfind("model ", 0) == 0) return tl::unexpected(e);
            return fail(e);
        }
        if (auto* model = std::get_if<nn::ModelDescription>(&*outcome)) {
            for (auto& w : folded_weight_warnings(proto)) model->import_warnings.push_back(std::move(w));
            for (auto& w : circular_pad_warnings(proto)) model->import_warnings.push_back(std::move(w));
            for (auto& w : batch_norm_momentum_warnings(proto)) model->import_warnings.push_back(std::move(w));
            for (const auto& n : model->nodes)
                if (n.op == "embedding" && n.attrs.contains("padding_index"))
                    model->import_warnings.push_back(
                        "embedding " + n.name + ": row " + n.attrs.at("padding_index").dump() +
                        " of its table is all zeros, as nn.Embedding(padding_idx=" +
                        n.attrs.at("padding_index").dump() +
                        ") keeps it: imported as that padding row, which gets no gradient and stays zero (PyTorch's "
                        "padding_idx; ONNX's Gather does not record it)");
            return with_run_recipe(std::move(*model));
        }
        if (inlined == kMaxInlinedIfs)
            return fail(Error{ErrorCode::kInvalidArgument,
                              "the graph has more than " + std::to_string(kMaxInlinedIfs) +
                                  " If nodes whose condition is known at import (each is inlined by a new walk)"});
        if (!rewritten) rewritten = proto.graph();
        if (auto done = inline_branch(*rewritten, std::get<StaticIf>(*outcome)); !done) return fail(done.error());
    }
}

Result<nn::ModelDescription> import_onnx_file(const std::string& path) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return make_error(ErrorCode::kIo, "model " + path + ": cannot open: " + ec.message());
    if (size > kMaxOnnxBytes)
        return make_error(ErrorCode::kInvalidArgument, "model " + path + ": " + std::to_string(size) +
                                                           " bytes, more than an ONNX file can hold (2 GiB)");
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(ErrorCode::kIo, "model " + path + ": cannot open");
    std::string bytes(static_cast<std::size_t>(size), '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (in.bad() || static_cast<std::uintmax_t>(in.gcount()) != size)
        return make_error(ErrorCode::kIo, "model " + path + ": read failed");
    return import_onnx(bytes, path);
}

}  // namespace psrun::onnx_io
