// Helpers of the operator-kind tests (ops_*_test.cpp): a model's forward on given data, naive
// numpy-style references (broadcast indexing), and the error parse_model gives a graph.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test/nn/engine_test_util.h"
#include "workerd/nn/parameter_init.h"

namespace psrun::nn::test {

// Row-major strides.
inline std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& dims) {
    std::vector<std::int64_t> s(dims.size(), 1);
    for (std::size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
    return s;
}

inline std::int64_t count_of(const std::vector<std::int64_t>& dims) {
    std::int64_t n = 1;
    for (const auto d : dims) n *= d;
    return n;
}

// The coordinates of flat index e in `dims`.
inline std::vector<std::int64_t> coords_of(std::int64_t e, const std::vector<std::int64_t>& dims) {
    std::vector<std::int64_t> c(dims.size());
    for (std::size_t i = dims.size(); i-- > 0;) {
        c[i] = e % dims[i];
        e /= dims[i];
    }
    return c;
}

// The flat index in a tensor of `from` (numpy-broadcast to the rank of `coords`) of the
// element at output coordinates `coords`.
inline std::int64_t broadcast_source(const std::vector<std::int64_t>& coords, const std::vector<std::int64_t>& from) {
    const std::size_t offset = coords.size() - from.size();
    std::int64_t idx = 0;
    for (std::size_t d = 0; d < from.size(); ++d) idx = idx * from[d] + (from[d] == 1 ? 0 : coords[d + offset]);
    return idx;
}

struct ForwardRun {
    std::vector<float> params;  // as drawn from the initializers
    std::vector<float> input;
    std::vector<float> output;  // the model's output, [N, K]
};

// Draws parameters (seed) and an input uniform in [-1, 1] (seed + 1), runs the forward in
// `precision`, and returns all three.
inline ForwardRun forward_of(const ModelDescription& model, std::int64_t batch, std::uint64_t seed,
                             Precision precision = Precision::kF32) {
    ForwardRun r;
    r.params.resize(static_cast<std::size_t>(model.parameter_count));
    initialize_parameters(model, seed, r.params);
    r.input = random_vector(static_cast<std::size_t>(*elements_per_example(model.input().dims) * batch), seed + 1);
    std::vector<float> grads;
    auto net = Network::create(model, NetworkOptions{batch, precision, true}, r.params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    std::copy(r.input.begin(), r.input.end(), (*net)->input().begin());
    (*net)->forward(false);
    r.output.assign((*net)->outputs().begin(), (*net)->outputs().end());
    return r;
}

// The values of tensor `name` in `params`.
inline std::vector<float> tensor_values(const ModelDescription& model, const std::vector<float>& params,
                                        const std::string& name) {
    const TensorDef* t = model.tensor(name);
    REQUIRE(t != nullptr);
    return {params.begin() + t->offset, params.begin() + t->offset + t->size};
}

// The error parse_model gives `layers` on an input of `shape` (FAILs when it parses).
inline std::string graph_error(const nlohmann::json& layers, const std::vector<std::int64_t>& shape,
                               const char* type = "float") {
    const nlohmann::json doc{
        {"input", {{"shape", shape}, {"type", type}}}, {"layers", layers}, {"loss", {{"kind", "mean_squared_error"}}}};
    auto model = parse_model(doc, "t.json");
    REQUIRE_FALSE(model);
    CHECK(model.error().code == ErrorCode::kInvalidArgument);
    return model.error().message;
}

// Every element within `tol` (relative to max(|expected|, 1)).
inline void check_close(const std::vector<float>& got, const std::vector<double>& expected, double tol = 1e-5) {
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("element " << i);
        CHECK(std::fabs(got[i] - expected[i]) <= tol * std::max(1.0, std::fabs(expected[i])));
    }
}

}  // namespace psrun::nn::test
