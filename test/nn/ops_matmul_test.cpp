// matmul (workerd/nn/ops/matmul.cpp): batched products with the batch dims broadcast either
// way (a shared weight matrix, a shared left matrix, both broadcast, Q K^T of one value, an
// attention block with softmax and reduce_mean), forward against a naive loop, gradients
// against central differences, bf16 against f32, and the shape errors.
#include <catch2/catch.hpp>

#include "test/nn/ops_test_util.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

struct MmCase {
    std::vector<std::int64_t> x, p;  // the input's dims after N, the parameter's
    bool param_first;
    int batch;
};

// out[..., i, j] = sum_k a[..., i, k] b[..., k, j], a and b numpy-broadcast.
std::vector<double> reference(const std::vector<float>& a, std::vector<std::int64_t> ad, const std::vector<float>& b,
                              std::vector<std::int64_t> bd, const std::vector<std::int64_t>& od) {
    const std::size_t r = od.size();
    const std::int64_t k = ad.back();
    std::vector<double> out;
    for (std::int64_t e = 0; e < count_of(od); ++e) {
        const auto c = coords_of(e, od);
        std::vector<std::int64_t> ca = c, cb = c;
        double sum = 0;
        for (std::int64_t kk = 0; kk < k; ++kk) {
            ca[r - 1] = kk;
            cb[r - 2] = kk;
            sum += double{a[static_cast<std::size_t>(broadcast_source(ca, ad))]} *
                   b[static_cast<std::size_t>(broadcast_source(cb, bd))];
        }
        out.push_back(sum);
    }
    return out;
}

TEST_CASE("matmul broadcasts batch dims either way, against a naive loop, finite differences and bf16",
          "[nn_engine][ops][matmul]") {
    const auto c = GENERATE(MmCase{{3, 4}, {4, 5}, false, 3},  // a shared weight (folded dB)
                            MmCase{{3, 4}, {4, 5}, false, 1}, MmCase{{4, 5}, {3, 4}, true, 3},  // a shared left matrix
                            MmCase{{1, 3, 4}, {2, 4, 5}, false, 3},                             // both broadcast
                            MmCase{{2, 4, 5}, {2, 3, 4}, true, 1},  // p broadcast along N only
                            MmCase{{4}, {4, 3}, false, 3});         // rank 2: the batch is the rows
    INFO("x " << json(c.x).dump() << " p " << json(c.p).dump() << (c.param_first ? " p @ x" : " x @ p") << " batch "
              << c.batch);
    const json layers = {
        {{"kind", "parameter"}, {"name", "p"}, {"shape", c.p}},
        {{"kind", "matmul"}, {"name", "out"}, {"inputs", c.param_first ? json{"p", "input"} : json{"input", "p"}}}};
    const auto model = graph_model(layers, c.x);
    const auto r = forward_of(model, c.batch, 3);
    std::vector<std::int64_t> xd = {c.batch};
    xd.insert(xd.end(), c.x.begin(), c.x.end());
    const auto od = concrete(model.value("out").dims, c.batch);
    const auto pv = tensor_values(model, r.params, "p/value");
    check_close(r.output, c.param_first ? reference(pv, c.p, r.input, xd, od) : reference(r.input, xd, pv, c.p, od),
                2e-5);
    check_gradients(model, c.batch, 5);
    check_bf16_against_f32(model, c.batch, 7);
}

TEST_CASE("matmul of a value with its own transpose (Q K^T): both gradients reach it", "[nn_engine][ops][matmul]") {
    const json layers = {{{"kind", "transpose"}, {"name", "t"}, {"perm", {0, 1, 3, 2}}},
                         {{"kind", "matmul"}, {"name", "out"}, {"inputs", {"input", "t"}}}};
    const auto model = graph_model(layers, {2, 3, 4});
    const auto r = forward_of(model, 3, 13);
    std::vector<std::int64_t> xd = {3, 2, 3, 4}, td = {3, 2, 4, 3};
    std::vector<float> xt(r.input.size());
    for (std::int64_t e = 0; e < count_of(td); ++e) {
        const auto c = coords_of(e, td);
        xt[static_cast<std::size_t>(e)] = r.input[static_cast<std::size_t>(((c[0] * 2 + c[1]) * 3 + c[3]) * 4 + c[2])];
    }
    check_close(r.output, reference(r.input, xd, xt, td, {3, 2, 3, 3}), 2e-5);
    check_gradients(model, 3, 15);
    check_bf16_against_f32(model, 2, 17);
}

TEST_CASE("an attention block of the new kinds: softmax(x Wq (x Wk)^T) x, mean over positions",
          "[nn_engine][ops][matmul][softmax]") {
    // x: N x 4 x 6; q, k = x Wq, x Wk; p = softmax(q k^T) (4 x 4 per example); out = mean_rows(p x).
    const json layers = {{{"kind", "parameter"}, {"name", "wq"}, {"shape", {6, 6}}},
                         {{"kind", "parameter"}, {"name", "wk"}, {"shape", {6, 6}}},
                         {{"kind", "matmul"}, {"name", "q"}, {"inputs", {"input", "wq"}}},
                         {{"kind", "matmul"}, {"name", "k"}, {"inputs", {"input", "wk"}}},
                         {{"kind", "transpose"}, {"name", "kt"}, {"perm", {0, 2, 1}}},
                         {{"kind", "matmul"}, {"name", "s"}, {"inputs", {"q", "kt"}}},
                         {{"kind", "softmax"}, {"name", "p"}},
                         {{"kind", "matmul"}, {"name", "o"}, {"inputs", {"p", "input"}}},
                         {{"kind", "reduce_mean"}, {"name", "out"}, {"axes", {1}}, {"keepdims", false}}};
    const auto model = graph_model(layers, {4, 6});
    check_gradients(model, 3, 19);
    check_bf16_against_f32(model, 2, 23);
}

TEST_CASE("matmul: inner dims, rank, the batch as the contracted dim, leading dims", "[nn_engine][ops][matmul]") {
    auto with_param = [](std::vector<std::int64_t> shape) {
        return json{{{"kind", "parameter"}, {"name", "p"}, {"shape", shape}},
                    {{"kind", "matmul"}, {"inputs", {"input", "p"}}}};
    };
    CHECK_THAT(graph_error(with_param({5, 2}), {3, 4}),
               Catch::Contains("layer 1 (matmul): inner dims differ: N x 3 x 4 and 5 x 2"));
    CHECK_THAT(graph_error(with_param({4}), {3, 4}), Catch::Contains("input 1 (p) is 4; matmul needs 2 to 6 dims"));
    CHECK_THAT(graph_error(with_param({3, 4, 2}), {2, 3, 4}),
               Catch::Contains("the leading dims of N x 2 x 3 x 4 and 3 x 4 x 2 do not broadcast"));
    CHECK_THAT(graph_error({{{"kind", "transpose"}, {"name", "t"}, {"perm", {1, 0}}},
                            {{"kind", "matmul"}, {"inputs", {"t", "input"}}}},
                           {3}),
               Catch::Contains("contract over the batch dim"));
    CHECK_THAT(graph_error({{{"kind", "transpose"}, {"name", "t"}, {"perm", {1, 0}}},
                            {{"kind", "matmul"}, {"inputs", {"input", "t"}}}},
                           {3}),
               Catch::Contains("N x 3 and 3 x N give N x N: the batch would meet itself"));
    CHECK_THAT(graph_error({{{"kind", "matmul"}, {"inputs", {"input", "input"}}}}, {3, 3}, "int"),
               Catch::Contains("holds integer ids"));
}

TEST_CASE("dense with last_axis on a 4-D input: per position, not flattened; gradients and bf16",
          "[nn_engine][ops][dense]") {
    // [N, H, W, F] -> [N, H, W, U]: a Linear after permute(0, 2, 3, 1), as the importer maps it.
    const json layers = {{{"kind", "dense"}, {"name", "out"}, {"units", 5}, {"last_axis", true}}};
    const auto model = graph_model(layers, {3, 2, 4});
    CHECK(model.value("out").dims.size() == 4);
    const std::int64_t batch = 2, positions = 3 * 2, features = 4, units = 5;
    const auto r = forward_of(model, batch, 13);
    const auto w = tensor_values(model, r.params, "out/w"), bias = tensor_values(model, r.params, "out/b");
    std::vector<double> want;
    for (std::int64_t p = 0; p < batch * positions; ++p)
        for (std::int64_t u = 0; u < units; ++u) {
            double s = bias[static_cast<std::size_t>(u)];
            for (std::int64_t f = 0; f < features; ++f)
                s += static_cast<double>(r.input[static_cast<std::size_t>(p * features + f)]) *
                     w[static_cast<std::size_t>(u * features + f)];
            want.push_back(s);
        }
    check_close(r.output, want, 2e-5);
    check_gradients(model, batch, 15);
    check_bf16_against_f32(model, batch, 17);
    // Without it a 4-D input is an image, flattened: [N, U].
    const auto flat = graph_model({{{"kind", "dense"}, {"name", "out"}, {"units", 5}}}, {3, 2, 4});
    CHECK(flat.value("out").dims.size() == 2);
    CHECK_THAT(graph_error({{{"kind", "dense"}, {"name", "out"}, {"units", 5}, {"last_axis", 1}}}, {3, 2, 4}),
               Catch::Contains("last_axis"));
}

}  // namespace
}  // namespace psrun::nn::test
