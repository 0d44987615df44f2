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
#include "workerd/onnx/onnx_freeze.h"
#include "workerd/onnx/onnx_functions.h"
#include "workerd/onnx/onnx_graph_digest.h"
#include "workerd/onnx/onnx_import_advice.h"
#include "workerd/onnx/onnx_importer.h"
#include "workerd/onnx/onnx_merged_initializers.h"
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

// Walks of a graph again with other readings of a fixed batch of 1 (each a whole import).
constexpr int kMaxReadingRetries = 16;

// The nodes whose outputs node `failed` reads, directly or not, itself included, by index; empty
// when `failed` is -1 (an error after the walk of the nodes, which any node may cause) or a node
// with subgraphs (If, Loop: they read outer values without naming them as inputs).
std::vector<bool> feeding_nodes(const GraphIndex& graph, int failed) {
    if (failed < 0) return {};
    for (const auto& attribute : graph.graph().node(failed).attribute())
        if (attribute.has_g() || attribute.graphs_size() > 0) return {};
    std::vector<bool> feeds(static_cast<std::size_t>(graph.graph().node_size()), false);
    std::vector<int> stack{failed};
    feeds[static_cast<std::size_t>(failed)] = true;
    while (!stack.empty()) {
        const auto& node = graph.graph().node(stack.back());
        stack.pop_back();
        for (const auto& input : node.input()) {
            const int p = input.empty() ? -1 : graph.producer(input);
            if (p < 0 || feeds[static_cast<std::size_t>(p)]) continue;
            feeds[static_cast<std::size_t>(p)] = true;
            stack.push_back(p);
        }
    }
    return feeds;
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
    if (auto inlined = inline_functions(proto, *opset); !inlined) return fail(inlined.error());
    auto graph = GraphIndex::build(proto.graph(), *opset);
    if (!graph) return fail(graph.error());
    PSRUN_TRY_ASSIGN(auto run_recipe, recorded_run_recipe(proto, source_name));
    auto listed = frozen_initializers(proto);
    if (!listed) return fail(listed.error());
    auto frozen = std::move(*listed);
    auto with_run_recipe = [&](nn::ModelDescription model) {
        if (run_recipe) model.recipe = *run_recipe;
        return model;
    };
    bool edited = false;
    if (auto recorded = recorded_description(proto, *graph, source_name, edited))
        return with_run_recipe(std::move(*recorded));
    // Parameters an eval-mode export merged by value get their own initializers again.
    const auto untied = untie_merged_initializers(*proto.mutable_graph());
    if (!untied.empty()) {
        graph = GraphIndex::build(proto.graph(), *opset);
        if (!graph) return fail(graph.error());
        for (const auto& [copy, source] : untied)
            if (frozen.count(source) != 0) frozen.insert(copy);
    }
    std::string origin = "imported from ONNX (" + proto.producer_name() + " " + proto.producer_version() + ")";
    if (edited)
        origin +=
            "; the graph was edited after psrun exported it, so its recorded description (layer names, "
            "dropout, loss) was set aside for what the graph computes";
    // Each If whose condition the walk finds known is inlined in a copy of the graph, and the
    // walk starts again on the copy. A walk that fails after choosing among the readings of a
    // fixed batch of 1 starts again with the next (ReadingChoices); the error is the first walk's.
    std::optional<onnx::GraphProto> rewritten;
    ReadingChoices choices;
    std::optional<Error> first_error;
    for (int inlined = 0, retries = 0;;) {
        std::optional<GraphIndex> index;
        if (rewritten) {
            auto built = GraphIndex::build(*rewritten, *opset);
            if (!built) return fail(built.error());
            index = std::move(*built);
        }
        const GraphIndex& walked = index ? *index : *graph;
        Importer importer(walked, *opset, std::string(source_name), frozen, &choices);
        auto outcome = importer.run(stem(source_name), origin);
        if (!outcome) {
            if (!first_error) first_error = outcome.error();
            const auto feeds = feeding_nodes(walked, importer.failed_node());
            const auto matters = [&](int node) {
                return feeds.empty() || (node >= 0 && feeds[static_cast<std::size_t>(node)]);
            };
            if (retries < kMaxReadingRetries && choices.next(matters)) {  // from the file's own graph again
                ++retries;
                inlined = 0;
                rewritten.reset();
                continue;
            }
            Error e = *first_error;
            e.message += fixed_batch_hint(proto);
            if (e.message.rfind("model ", 0) == 0) return tl::unexpected(e);
            return fail(e);
        }
        if (auto* model = std::get_if<nn::ModelDescription>(&*outcome)) {
            add_export_warnings(proto, *model);
            if (auto fixed = fixed_batch_warning(proto, choices.changed())) model->import_warnings.push_back(*fixed);
            if (!untied.empty()) model->import_warnings.push_back(merged_initializers_warning(untied));
            return with_run_recipe(std::move(*model));
        }
        if (inlined == kMaxInlinedIfs)
            return fail(Error{ErrorCode::kInvalidArgument, "the graph has more than " + std::to_string(kMaxInlinedIfs) +
                                                               " If and Loop nodes (each is inlined by a new walk)"});
        if (!rewritten) rewritten = proto.graph();
        const auto* choice = std::get_if<StaticIf>(&*outcome);
        if (auto done = choice != nullptr ? inline_branch(*rewritten, *choice)
                                          : unroll_loop(*rewritten, std::get<LoopUnroll>(*outcome));
            !done)
            return fail(done.error());
        ++inlined;
        choices.rewind();
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
