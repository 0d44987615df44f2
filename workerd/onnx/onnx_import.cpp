// import_onnx (onnx_model.h): the graph's chain (onnx_graph.h) translated layer by layer
// (onnx_chain_builder.h) into a JSON description that parse_model validates like any model
// file; the initializers become initial_parameters in the engine's layouts. A file psrun
// exported carries its own description (kDescriptionKey): when the graph matches it, that
// description (initializers, dropout, names, loss, recipe) is the result, so a round trip
// keeps the architecture hash.
#include <climits>
#include <filesystem>
#include <fstream>

#include "workerd/nn/model_summary.h"
#include "workerd/onnx/onnx_chain_builder.h"
#include "workerd/onnx/onnx_model.h"

namespace psrun::onnx_io {

namespace {

// Largest file read: protobuf's own limit.
constexpr std::uintmax_t kMaxOnnxBytes = INT_MAX;

Result<std::int64_t> default_opset(const onnx::ModelProto& proto) {
    for (const auto& o : proto.opset_import()) {
        if (!o.domain().empty() && o.domain() != "ai.onnx") continue;
        if (o.version() < kMinImportOpset || o.version() > kMaxImportOpset)
            return make_error(ErrorCode::kInvalidArgument,
                              "opset " + std::to_string(o.version()) +
                                  ": the importer reads opsets " + std::to_string(kMinImportOpset) +
                                  " to " + std::to_string(kMaxImportOpset) +
                                  " (torch.onnx.export(..., opset_version=13))");
        return o.version();
    }
    return make_error(ErrorCode::kInvalidArgument, "no opset_import of the default ONNX domain");
}

// The input's [N, C, H, W] or [N, F] (then 1 x 1 x F): fixed positive sizes past the batch dim.
Result<nn::ActivationShape> input_shape(const onnx::ValueInfoProto& input, bool& is_2d) {
    const std::string where = "input '" + input.name() + "': ";
    if (!input.type().has_tensor_type() ||
        input.type().tensor_type().elem_type() != onnx::TensorProto::FLOAT)
        return make_error(ErrorCode::kInvalidArgument, where + "not a float32 tensor");
    const auto& shape = input.type().tensor_type().shape();
    const int rank = shape.dim_size();
    if (rank != 4 && rank != 2)
        return make_error(ErrorCode::kInvalidArgument,
                          where + "rank " + std::to_string(rank) +
                              ": the engine takes [N, C, H, W] images or [N, F] features");
    std::vector<std::int64_t> dims;
    for (int i = 1; i < rank; ++i) {
        const auto& d = shape.dim(i);
        if (!d.has_dim_value() || d.dim_value() < 1 || d.dim_value() > nn::kMaxTensorElements)
            return make_error(ErrorCode::kInvalidArgument,
                              where + "dimension " + std::to_string(i) +
                                  " is not a fixed positive size (only the batch "
                                  "dimension may be symbolic)");
        dims.push_back(d.dim_value());
    }
    is_2d = rank == 2;
    nn::ActivationShape s = is_2d ? nn::ActivationShape{1, 1, dims[0], false}
                                  : nn::ActivationShape{dims[0], dims[1], dims[2], false};
    if (!nn::checked_product({s.channels, s.height, s.width}))
        return make_error(ErrorCode::kInvalidArgument, where + "too large");
    return s;
}

// Same layers but dropout (which an export leaves out), same shapes and options.
bool same_graph(const nn::ModelDescription& a, const nn::ModelDescription& b) {
    auto trainable = [](const nn::ModelDescription& m) {
        std::vector<const nn::LayerSpec*> out;
        for (const auto& l : m.layers)
            if (l.kind != nn::LayerKind::kDropout) out.push_back(&l);
        return out;
    };
    const auto la = trainable(a), lb = trainable(b);
    if (!(a.input == b.input) || a.classes != b.classes || la.size() != lb.size()) return false;
    for (std::size_t i = 0; i < la.size(); ++i) {
        const auto &x = *la[i], &y = *lb[i];
        if (x.kind != y.kind || x.filters != y.filters || x.units != y.units ||
            !(x.kernel == y.kernel) || !(x.stride == y.stride) || x.padding != y.padding ||
            x.bias != y.bias || !(x.input == y.input) || !(x.output == y.output))
            return false;
    }
    return true;
}

// The imported values in parameter_init.h's order and layouts (dense columns back to HWC).
Result<std::vector<float>> engine_parameters(const nn::ModelDescription& model,
                                             const ChainBuilder& chain) {
    std::vector<float> out;
    out.reserve(static_cast<std::size_t>(model.parameter_count));
    for (std::size_t i = 0; i < model.layers.size(); ++i) {
        const auto& layer = model.layers[i];
        const auto& p = chain.params()[i];
        if (layer.params.empty()) continue;
        if (layer.params[0].shape != p.w_dims ||
            static_cast<std::int64_t>(p.w.size()) != layer.params[0].size)
            return make_error(ErrorCode::kInvalidArgument,
                              chain.layer_nodes()[i] + ": weights " + ints_text(p.w_dims) +
                                  " where the layer needs " + ints_text(layer.params[0].shape));
        if (layer.kind == nn::LayerKind::kDense && !layer.input.flat) {
            const auto hwc = dense_columns_to_hwc(p.w, layer.units, layer.input);
            out.insert(out.end(), hwc.begin(), hwc.end());
        } else {
            out.insert(out.end(), p.w.begin(), p.w.end());
        }
        out.insert(out.end(), p.b.begin(), p.b.end());
    }
    if (static_cast<std::int64_t>(out.size()) != model.parameter_count)
        return make_error(ErrorCode::kInvalidArgument,
                          "the initializers hold " + std::to_string(out.size()) + " values for " +
                              std::to_string(model.parameter_count) + " parameters");
    return out;
}

std::string stem(std::string_view source) {
    std::string name = std::filesystem::path(std::string(source)).stem().string();
    return name.empty() ? "onnx" : name;
}

}  // namespace

Result<nn::ModelDescription> import_onnx(std::string_view bytes, std::string_view source_name) {
    const std::string prefix = "model " + std::string(source_name) + ": ";
    auto fail = [&prefix](const Error& e) {
        return make_error(ErrorCode::kInvalidArgument, prefix + e.message);
    };
    onnx::ModelProto proto;
    if (bytes.size() > kMaxOnnxBytes ||
        !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
        return make_error(ErrorCode::kInvalidArgument,
                          prefix +
                              "not an ONNX model (the protobuf does not parse: a "
                              "truncated file or another format)");
    if (!proto.has_graph() || proto.graph().node_size() == 0)
        return make_error(ErrorCode::kInvalidArgument,
                          prefix + "not an ONNX model (no graph or no nodes)");
    auto opset = default_opset(proto);
    if (!opset) return fail(opset.error());
    auto graph = GraphIndex::build(proto.graph());
    if (!graph) return fail(graph.error());
    bool is_2d = false;
    auto input = input_shape(graph->input(), is_2d);
    if (!input) return fail(input.error());
    ChainBuilder chain(*graph, *input, is_2d, *opset);
    for (std::size_t i = 0; i < graph->chain().size();) {
        auto used = chain.add(i);
        if (!used) return fail(used.error());
        i += *used;
    }
    if (auto on_chain = graph->check_all_on_chain(); !on_chain) return fail(on_chain.error());
    if (!chain.shape().flat)
        return make_error(ErrorCode::kInvalidArgument,
                          prefix + "the graph ends in a " + chain.shape().to_string() +
                              " image, not flat logits (end with a Gemm/Linear layer)");
    nlohmann::json doc{
        {"format", 1},
        {"name", stem(source_name)},
        {"description",
         "imported from ONNX (" + proto.producer_name() + " " + proto.producer_version() + ")"},
        {"input",
         {{"channels", input->channels}, {"height", input->height}, {"width", input->width}}},
        {"classes", chain.shape().channels},
        {"layers", chain.layers()}};
    auto model = nn::parse_model(doc, source_name);
    if (!model) return tl::unexpected(model.error());
    auto params = engine_parameters(*model, chain);
    if (!params) return fail(params.error());
    for (const auto& meta : proto.metadata_props()) {
        if (meta.key() != kDescriptionKey) continue;
        auto recorded = nn::parse_model_text(meta.value(), source_name);
        if (recorded && same_graph(*recorded, *model)) model = std::move(recorded);
    }
    model->initial_parameters = std::make_shared<const std::vector<float>>(std::move(*params));
    return model;
}

Result<nn::ModelDescription> import_onnx_file(const std::string& path) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return make_error(ErrorCode::kIo, "model " + path + ": cannot open: " + ec.message());
    if (size > kMaxOnnxBytes)
        return make_error(ErrorCode::kInvalidArgument,
                          "model " + path + ": " + std::to_string(size) +
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
