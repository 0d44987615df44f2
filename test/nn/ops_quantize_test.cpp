// quantize_linear and dequantize_linear (workerd/nn/ops/quantize.cpp) against a loop of torch's
// fake quantization: per tensor and per channel, uint8 and int8, the type's range and a narrowed
// one (torch's 0..127), values on the bounds and beyond them; the straight-through gradient
// (passing on the bounds, zero beyond); bf16 against f32; export and import of the graph alone
// (the narrowed range as QuantizeLinear + Clip, read back as one layer); and the errors. torch
// itself is the reference in test/onnx/quant_models.py.
#include <algorithm>
#include <cmath>

#include <catch2/catch.hpp>

#include "test/nn/ops_test_util.h"
#include "test/onnx/onnx_ops_test_util.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

struct QuantCase {
    std::vector<float> scale;
    std::vector<std::int64_t> zero;
    const char* type;
    std::int64_t min, max;
};

// quantize_linear then dequantize_linear over axis 1 of x [N, C, 4].
json quant_layers(const QuantCase& c) {
    const json fields = {{"scale", c.scale}, {"zero_point", c.zero}, {"type", c.type}, {"axis", 1}};
    json q = fields, d = fields;
    q["kind"] = "quantize_linear", q["name"] = "q", q["min"] = c.min, q["max"] = c.max;
    d["kind"] = "dequantize_linear", d["name"] = "d";
    return json::array({q, d});
}

// x [batch, C, 4]: per channel, element 0 exactly on the upper bound, element 1 on the lower
// one, element 2 three steps beyond one or the other, element 3 anywhere up to 8 steps beyond.
std::vector<float> quant_input(const QuantCase& c, std::int64_t batch) {
    const auto channels = static_cast<std::int64_t>(c.scale.size());
    auto x = random_vector(static_cast<std::size_t>(batch * channels * 4), 11);
    for (std::int64_t i = 0; i < batch * channels * 4; ++i) {
        const auto ch = static_cast<std::size_t>((i / 4) % channels);
        const double span = (static_cast<double>(c.max - c.min) + 16.0) * c.scale[ch];
        const double centre =
            (static_cast<double>(c.max + c.min) / 2.0 - static_cast<double>(c.zero[ch])) * c.scale[ch];
        auto& v = x[static_cast<std::size_t>(i)];
        v = static_cast<float>(centre + v * span / 2.0);
        const std::int64_t beyond = (i / 4) % 2 == 0 ? c.max + 3 : c.min - 3;
        if (i % 4 < 3)
            v = static_cast<float>(static_cast<double>((i % 4 == 0   ? c.max
                                                        : i % 4 == 1 ? c.min
                                                                     : beyond) -
                                                       c.zero[ch]) *
                                   c.scale[ch]);
    }
    return x;
}

TEST_CASE("quantize_linear + dequantize_linear: torch's fake quantization and its straight-through gradient",
          "[eltwise][quantize]") {
    const QuantCase cases[] = {
        {{0.05f}, {3}, "uint8", 0, 255},
        {{0.01f, 0.02f, 0.004f}, {0, 10, 200}, "uint8", 0, 127},
        {{0.03f, 0.002f}, {-5, 0}, "int8", -128, 127},
        {{0.1f, 0.05f}, {0, 20}, "int8", -64, 63},
    };
    for (const auto& c : cases) {
        INFO(c.type << " [" << c.min << ", " << c.max << "], " << c.scale.size() << " scales");
        const auto channels = static_cast<std::int64_t>(c.scale.size());
        const auto model = graph_model(quant_layers(c), {channels, 4});
        const std::int64_t batch = 3;
        const auto x = quant_input(c, batch);
        std::vector<double> y(x.size()), dx(x.size());
        std::vector<float> dy(x.size());
        std::size_t on_bounds = 0, beyond = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const auto ch = (i / 4) % static_cast<std::size_t>(channels);
            const double s = c.scale[ch], z = static_cast<double>(c.zero[ch]);
            const double q = std::nearbyint(static_cast<double>(x[i]) / s) + z;
            y[i] = (std::clamp(q, double(c.min), double(c.max)) - z) * s;
            dy[i] = 0.25f + static_cast<float>(i % 7);
            const bool passes = q >= double(c.min) && q <= double(c.max);
            dx[i] = passes ? dy[i] : 0.0;
            on_bounds += q == double(c.min) || q == double(c.max);
            beyond += !passes;
        }
        CHECK(on_bounds >= static_cast<std::size_t>(2 * batch * channels));
        CHECK(beyond >= static_cast<std::size_t>(batch * channels));
        LayerHarness h(model, 0, 2, batch);
        check_close(h.forward(x), y, 1e-6);
        check_close(h.backward(dy), dx, 1e-5);
        check_bf16_against_f32(model, batch, 3);
        json layers = quant_layers(c);
        layers.push_back({{"kind", "flatten"}});
        onnx_io::test::check_round_trip(layers, {channels, 4});
    }
}

TEST_CASE("quantize_linear, dequantize_linear: errors name what is wrong", "[eltwise][quantize]") {
    using Catch::Matchers::Contains;
    const json ok = {{"kind", "quantize_linear"}, {"scale", {0.1}}};
    const auto with = [&](const char* key, json value) {
        json layer = ok;
        if (value.is_null()) layer.erase(key);
        else layer[key] = std::move(value);
        return graph_error(json::array({layer}), {3, 4});
    };
    CHECK_THAT(with("scale", nullptr), Contains("scale"));
    CHECK_THAT(with("scale", {0.1, -1}), Contains("positive"));
    CHECK_THAT(with("scale", json::array()), Contains("1 or more"));
    CHECK_THAT(with("zero_point", {1, 2}), Contains("as long as scale"));
    CHECK_THAT(with("zero_point", {300}), Contains("range"));
    CHECK_THAT(with("type", "int4"), Contains("type"));
    CHECK_THAT(with("min", -1), Contains("min"));
    CHECK_THAT(with("max", 256), Contains("max"));
    CHECK_THAT(with("max", 0), Contains("larger than \"min\""));
    CHECK_THAT(with("scale", {0.1, 0.2}), Contains("one per index of axis 1"));
    json dequantize = ok;
    dequantize["kind"] = "dequantize_linear", dequantize["min"] = 0;
    CHECK_THAT(graph_error(json::array({dequantize}), {3, 4}), Contains("min"));
    CHECK_THAT(graph_error(json::array({ok}), {4}, "int"), Contains("expects floats"));
}

}  // namespace
}  // namespace psrun::nn::test
