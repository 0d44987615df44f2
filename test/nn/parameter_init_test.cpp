// Initial values keyed by tensor name (workerd/nn/parameter_init.h): a tensor added before
// others leaves their initial values as they were (review 2, risk 6: they were keyed by the
// tensor's index), an embedding table's row initializer keeps its seed, and tensors of one
// shape and initializer but other names draw different values.
#include <catch2/catch.hpp>

#include <span>
#include <string>
#include <vector>

#include "test/nn/graph_test_helpers.h"
#include "workerd/nn/model_description.h"
#include "workerd/nn/parameter_init.h"

using namespace psrun::nn;
using namespace psrun::nn::test;
using nlohmann::json;

namespace {

// ids [N, 5] -> embedding "emb" (50 x 8) -> flatten -> dense "a" 16 -> tanh -> dense "b" 3. With
// `extra`, an embedding "emb0" of the same ids comes first (added to emb's output) and a layer
// norm "ln" before "a": every tensor of the plain model moves to a later index.
ModelDescription init_model(bool extra) {
    json layers = json::array();
    if (extra)
        layers.push_back(
            {{"kind", "embedding"}, {"name", "emb0"}, {"inputs", {"ids"}}, {"vocabulary", 50}, {"dim", 8}});
    layers.push_back({{"kind", "embedding"}, {"name", "emb"}, {"inputs", {"ids"}}, {"vocabulary", 50}, {"dim", 8}});
    if (extra) layers.push_back({{"kind", "add"}, {"name", "both"}, {"inputs", {"emb0", "emb"}}});
    layers.push_back({{"kind", "flatten"}, {"name", "flat"}});
    if (extra) layers.push_back({{"kind", "layer_norm"}, {"name", "ln"}});
    layers.push_back({{"kind", "dense"}, {"name", "a"}, {"units", 16}});
    layers.push_back({{"kind", "tanh"}, {"name", "t"}});
    layers.push_back({{"kind", "dense"}, {"name", "b"}, {"units", 3}});
    return parse_ok(
        {{"inputs", {{{"name", "ids"}, {"dims", {5}}, {"type", "int"}}}}, {"layers", layers}, {"classes", 3}});
}

std::vector<float> values_of(const ModelDescription& model, const std::vector<float>& params, const std::string& name) {
    for (const auto& t : model.tensors)
        if (t.name == name) return {params.begin() + t.offset, params.begin() + t.offset + t.size};
    FAIL("no tensor " << name);
    return {};
}

std::size_t index_of(const ModelDescription& model, const std::string& name) {
    for (std::size_t i = 0; i < model.tensors.size(); ++i)
        if (model.tensors[i].name == name) return i;
    FAIL("no tensor " << name);
    return 0;
}

}  // namespace

TEST_CASE("initial values are keyed by the tensor's name, not its place in the list", "[parameter_init]") {
    const ModelDescription plain = init_model(false), more = init_model(true);
    REQUIRE(more.tensors.size() == plain.tensors.size() + 3);
    std::vector<float> p(static_cast<std::size_t>(plain.parameter_count)),
        q(static_cast<std::size_t>(more.parameter_count));
    initialize_parameters(plain, 42, p);
    initialize_parameters(more, 42, q);
    std::size_t compared = 0;
    for (const auto& t : plain.tensors) {
        INFO(t.name);
        REQUIRE(index_of(more, t.name) != index_of(plain, t.name));  // every tensor moved in the list
        const auto a = values_of(plain, p, t.name), b = values_of(more, q, t.name);
        CHECK(a == b);
        ++compared;
    }
    CHECK(compared == plain.tensors.size());
    // The embedding table's row initializer (a sparse table's on psd) keeps its seed as well.
    const auto rows_plain = table_row_init(plain, index_of(plain, "emb/table"), 42);
    const auto rows_more = table_row_init(more, index_of(more, "emb/table"), 42);
    const auto rows_other = table_row_init(more, index_of(more, "emb0/table"), 42);
    REQUIRE(rows_plain);
    REQUIRE(rows_more);
    CHECK(rows_plain->seed == rows_more->seed);
    REQUIRE(rows_other);
    CHECK(rows_other->seed != rows_more->seed);
    // Another seed draws other values.
    std::vector<float> r(p.size());
    initialize_parameters(plain, 43, r);
    CHECK(r != p);
}

TEST_CASE("tensors of one shape and initializer but other names draw different values", "[parameter_init]") {
    const auto model = parse_ok({{"inputs", {{{"name", "x"}, {"dims", {6}}}}},
                                 {"layers",
                                  {{{"kind", "dense"}, {"name", "h1"}, {"units", 6}},
                                   {{"kind", "dense"}, {"name", "h2"}, {"units", 6}},
                                   {{"kind", "dense"}, {"name", "out"}, {"units", 2}}}},
                                 {"classes", 2}});
    std::vector<float> p(static_cast<std::size_t>(model.parameter_count));
    initialize_parameters(model, 7, p);
    const auto& h1 = model.tensors[index_of(model, model.tensors[0].name)];
    const auto& h2 = model.tensors[2];
    REQUIRE(h1.shape == h2.shape);
    CHECK(tensor_stream(h1) != tensor_stream(h2));
    CHECK(values_of(model, p, h1.name) != values_of(model, p, h2.name));
}
