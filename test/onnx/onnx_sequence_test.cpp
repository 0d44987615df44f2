// Sequence models as PyTorch 1.13 exports them (test/onnx/sequence_models.py, run with
// /usr/bin/python3 and torch): nn.Embedding (Gather on the weight initializer), nn.LSTM and
// nn.GRU with batch_first (Transpose/Squeeze around the node, PyTorch's gate reordering of the
// weights: layout "pytorch"), uni- and bidirectional, and folded exports (plain W, R, B in
// ONNX's gate order: layout "onnx"). Each imports, computes PyTorch's outputs on PyTorch's
// batch, and survives export and import with the same outputs.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/rng.h"
#include "test/onnx/onnx_ops_test_util.h"
#include "workerd/nn/model_summary.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/nn/zoo.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

using namespace psrun;
using onnx_io::test::kinds;

namespace onnx_sequence_test {

namespace {

// The exports, made once per test run into a temporary directory (the tests run in the
// source root).
const std::filesystem::path& exports() {
    static const std::filesystem::path dir = [] {
        auto d = std::filesystem::temp_directory_path() / ("psrun-seq-" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        const std::string command = "timeout 120 /usr/bin/python3 test/onnx/sequence_models.py '" + d.string() +
                                    "' >'" + d.string() + "/log' 2>&1";
        INFO(command);
        REQUIRE(std::system(command.c_str()) == 0);
        return d;
    }();
    return dir;
}

struct Cleanup {
    ~Cleanup() {
        std::error_code ignored;
        std::filesystem::remove_all(
            std::filesystem::temp_directory_path() / ("psrun-seq-" + std::to_string(::getpid())), ignored);
    }
} cleanup;

std::string read(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

template <typename T>
std::vector<T> read_raw(const std::filesystem::path& path) {
    const std::string bytes = read(path);
    std::vector<T> v(bytes.size() / sizeof(T));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
    return v;
}

// The model's outputs on the batch of `name`.input (eval mode).
std::vector<float> outputs(const nn::ModelDescription& model, const std::string& name, std::int64_t batch) {
    std::vector<float> params = *model.initial_parameters, grads;
    auto net = nn::Network::create(model, nn::NetworkOptions{batch, nn::Precision::kF32, true}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    if (model.input().type == nn::ElementType::kInt) {
        const auto ids = read_raw<std::int64_t>(exports() / (name + ".input"));
        REQUIRE(ids.size() == (*net)->input_ids().size());
        std::copy(ids.begin(), ids.end(), (*net)->input_ids().begin());
    } else {
        const auto x = read_raw<float>(exports() / (name + ".input"));
        REQUIRE(x.size() == (*net)->input().size());
        std::copy(x.begin(), x.end(), (*net)->input().begin());
    }
    (*net)->forward(false);
    return {(*net)->outputs().begin(), (*net)->outputs().end()};
}

}  // namespace

TEST_CASE("PyTorch's sequence models import, compute PyTorch's outputs and survive a round trip", "[onnx][sequence]") {
    struct Case {
        std::string name, kind;
    };
    const auto c =
        GENERATE(Case{"embedding", "embedding"}, Case{"lstm", "lstm"}, Case{"lstm_bi", "lstm"}, Case{"gru", "gru"},
                 Case{"gru_bi", "gru"}, Case{"lstm_folded", "lstm"}, Case{"gru_folded", "gru"}, Case{"rnn", "rnn"},
                 Case{"rnn_bi", "rnn"}, Case{"rnn_relu", "rnn"}, Case{"rnn_relu_bi", "rnn"}, Case{"rnn_folded", "rnn"});
    CAPTURE(c.name);
    auto model = onnx_io::import_onnx(read(exports() / (c.name + ".onnx")), c.name + ".onnx");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    const auto k = kinds(*model);
    CHECK(std::count(k.begin(), k.end(), c.kind) == 1);
    for (const auto& n : model->nodes)
        if (n.op == "lstm" || n.op == "gru" || n.op == "rnn")
            CHECK(n.attrs.at("layout") == (c.name.find("folded") == std::string::npos ? "pytorch" : "onnx"));
    const auto expected = read_raw<float>(exports() / (c.name + ".output"));
    const auto got = outputs(*model, c.name, 3);
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-4).margin(1e-5));

    auto bytes = onnx_io::export_onnx(*model, *model->initial_parameters);
    INFO((bytes ? std::string() : bytes.error().message));
    REQUIRE(bytes);
    auto back = onnx_io::import_onnx(*bytes, "back.onnx");
    INFO((back ? std::string() : back.error().message));
    REQUIRE(back);
    CHECK(nn::architecture_hash(*back) == nn::architecture_hash(*model));
    CHECK(outputs(*back, c.name, 3) == got);
    // Without the description the export embeds, the graph alone (the kind's own ONNX nodes).
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    proto.clear_metadata_props();
    auto graph_only = onnx_io::import_onnx(proto.SerializeAsString(), "graph.onnx");
    INFO((graph_only ? std::string() : graph_only.error().message));
    REQUIRE(graph_only);
    const auto again = outputs(*graph_only, c.name, 3);
    REQUIRE(again.size() == got.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(again[i] == Approx(got[i]).epsilon(1e-5).margin(1e-6));
}

TEST_CASE("a packed LSTM whose last cell state c_n is read imports as a layer per step and computes PyTorch's c_n",
          "[onnx][sequence]") {
    auto model = onnx_io::import_onnx(read(exports() / "packed_cell_state.onnx"), "packed_cell_state.onnx");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    const auto k = kinds(*model);
    CHECK(std::count(k.begin(), k.end(), "lstm") == 4);  // the 4 steps, binding the same tensors
    CHECK(model->tensors.size() == 6u);                  // rnn's four and fc's two
    const auto expected = read_raw<float>(exports() / "packed_cell_state.output");
    const auto got = outputs(*model, "packed_cell_state", 3);
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-4).margin(1e-5));
}

TEST_CASE("PyTorch's sequence models: the imported model's gradients are PyTorch's, tensor by tensor",
          "[onnx][sequence]") {
    const std::string name = GENERATE("embedding", "lstm", "lstm_bi", "gru", "gru_bi", "rnn", "rnn_bi", "rnn_relu",
                                      "rnn_relu_bi", "packed_cell_state");
    CAPTURE(name);
    auto model = onnx_io::import_onnx(read(exports() / (name + ".onnx")), name + ".onnx");
    REQUIRE(model);
    const auto expected = nlohmann::json::parse(read(exports() / (name + ".grads.json")));
    std::vector<float> params = *model->initial_parameters, grads(params.size(), -7.0f);
    auto net = nn::Network::create(*model, nn::NetworkOptions{3, nn::Precision::kF32}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    if (model->input().type == nn::ElementType::kInt) {
        const auto ids = read_raw<std::int64_t>(exports() / (name + ".input"));
        std::copy(ids.begin(), ids.end(), (*net)->input_ids().begin());
    } else {
        const auto x = read_raw<float>(exports() / (name + ".input"));
        std::copy(x.begin(), x.end(), (*net)->input().begin());
    }
    (*net)->forward(true, 1);
    (*net)->backward_from(expected.at("r").get<std::vector<float>>());
    // Every tensor carries its PyTorch name and layout (the file's initializers).
    REQUIRE(model->tensors.size() == expected.at("grads").size());
    for (const auto& t : model->tensors) {
        INFO("tensor " << t.name);
        REQUIRE(expected.at("grads").contains(t.name));
        const auto want = expected.at("grads").at(t.name).get<std::vector<float>>();
        REQUIRE(want.size() == static_cast<std::size_t>(t.size));
        for (std::size_t i = 0; i < want.size(); ++i)
            CHECK(grads[static_cast<std::size_t>(t.offset) + i] == Approx(want[i]).epsilon(1e-4).margin(1e-5));
    }
}

TEST_CASE(
    "LSTM, GRU and RNN attributes the cells cannot honour, and what packed sequences cannot be, are refused "
    "naming the node",
    "[onnx][sequence]") {
    struct Case {
        std::string name, node, why;
    };
    const auto c =
        GENERATE(Case{"lstm_clip", "/rnn/LSTM", "clip is not supported"},
                 Case{"gru_activations", "/rnn/GRU", "activations [Relu, Tanh] are not supported"},
                 Case{"rnn_sigmoid", "/rnn/RNN", "activation Sigmoid: the engine's RNN cell is Tanh or Relu"},
                 Case{"packed_bi_folded", "/rnn/LSTM", "sequence_lens on a bidirectional node whose W, R and B"},
                 Case{"sorted_batch", "/TopK", "it sorts along the batch axis"});
    auto model = onnx_io::import_onnx(read(exports() / (c.name + ".onnx")), c.name + ".onnx");
    REQUIRE_FALSE(model);
    CHECK(model.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(model.error().message, Catch::Matchers::Contains(c.node) && Catch::Matchers::Contains(c.why));
}

TEST_CASE(
    "what the importer never writes (batch first, two directions, the original GRU, ONNX's layout, no bias) "
    "survives export and an import of the graph alone",
    "[onnx][sequence]") {
    auto model = nn::load_model("test/onnx/models/sequence.json");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    std::vector<float> params(static_cast<std::size_t>(model->parameter_count));
    nn::initialize_parameters(*model, 5, params);
    auto bytes = onnx_io::export_onnx(*model, params);
    INFO((bytes ? std::string() : bytes.error().message));
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    proto.clear_metadata_props();
    auto back = onnx_io::import_onnx(proto.SerializeAsString(), "graph.onnx");
    INFO((back ? std::string() : back.error().message));
    REQUIRE(back);
    REQUIRE(back->initial_parameters);
    auto run = [](const nn::ModelDescription& m, const std::vector<float>& p) {
        std::vector<float> grads;
        auto net = nn::Network::create(m, nn::NetworkOptions{3, nn::Precision::kF32, true}, p, grads);
        INFO((net ? std::string() : net.error().message));
        REQUIRE(net);
        psrun::Rng rng(9);
        for (auto& id : (*net)->input_ids()) id = static_cast<std::int32_t>(rng.below(20));
        (*net)->forward(false);
        return std::vector<float>((*net)->outputs().begin(), (*net)->outputs().end());
    };
    const auto a = run(*model, params), b = run(*back, *back->initial_parameters);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == Approx(a[i]).epsilon(1e-5).margin(1e-6));
}

}  // namespace onnx_sequence_test
