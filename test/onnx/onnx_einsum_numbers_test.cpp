// The Einsum lowering plan (workerd/nn/ops/einsum.h) run step by step on doubles, as the
// engine's kinds compute them, against a naive einsum over every assignment of the letters, for
// torch.einsum's usual equations and the corners: broadcast ellipsis, letters summed in one
// operand, outer and element-wise products, a contracted letter of size 1 against n, the batch
// as a free letter of either operand, one-operand transposes and sums.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "common/rng.h"
#include "workerd/nn/ops/einsum.h"

using namespace psrun;
using nn::Dim;
using nn::Dims;

namespace onnx_einsum_numbers_test {

namespace {

const Dim N = Dim::batch_times(1);
Dim d(std::int64_t v) { return Dim::of(v); }

nn::EinsumPlan planned(const std::string& eq, const std::vector<Dims>& dims) {
    auto p = nn::plan_einsum(eq, dims);
    INFO(eq << ": " << (p ? "" : p.error().message));
    REQUIRE(p);
    return std::move(*p);
}

// A dense row-major tensor of doubles.
struct Tensor {
    std::vector<std::int64_t> shape;
    std::vector<double> v;
};

std::int64_t count(const std::vector<std::int64_t>& s) {
    return std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
}

// Calls f(index) for every index of `shape`, in row-major order.
void each_index(const std::vector<std::int64_t>& shape,
                const std::function<void(const std::vector<std::int64_t>&)>& f) {
    std::vector<std::int64_t> i(shape.size(), 0);
    for (std::int64_t n = 0; n < count(shape); ++n) {
        f(i);
        for (std::size_t a = shape.size(); a-- > 0;)
            if (++i[a] < shape[a]) break;
            else i[a] = 0;
    }
}

// The offset of `index` in `shape`, numpy-broadcast: `index` may be longer (leading entries
// dropped) and a dim of 1 reads entry 0.
std::int64_t offset(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& index) {
    std::int64_t o = 0;
    const std::size_t skip = index.size() - shape.size();
    for (std::size_t a = 0; a < shape.size(); ++a) o = o * shape[a] + (shape[a] == 1 ? 0 : index[skip + a]);
    return o;
}

// One plan step on doubles, as the engine's kind computes it.
Tensor run_step(const nn::EinsumStep& s, const std::vector<const Tensor*>& in, std::int64_t batch) {
    Tensor out{nn::concrete(s.dims, batch), {}};
    out.v.assign(static_cast<std::size_t>(count(out.shape)), 0.0);
    const Tensor& x = *in[0];
    if (s.kind == "reshape") {
        out.v = x.v;
    } else if (s.kind == "transpose") {
        const auto perm = s.attrs.at("perm").get<std::vector<std::int64_t>>();
        std::size_t k = 0;
        each_index(out.shape, [&](const std::vector<std::int64_t>& i) {
            std::vector<std::int64_t> src(i.size());
            for (std::size_t a = 0; a < perm.size(); ++a) src[static_cast<std::size_t>(perm[a])] = i[a];
            out.v[k++] = x.v[static_cast<std::size_t>(offset(x.shape, src))];
        });
    } else if (s.kind == "reduce_sum") {
        const auto axes = s.attrs.at("axes").get<std::vector<std::int64_t>>();
        std::size_t k = 0;
        each_index(x.shape, [&](const std::vector<std::int64_t>& i) {
            std::vector<std::int64_t> kept;
            for (std::size_t a = 0; a < i.size(); ++a)
                if (std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(a)) == axes.end())
                    kept.push_back(i[a]);
            out.v[static_cast<std::size_t>(offset(out.shape, kept))] += x.v[k++];
        });
    } else if (s.kind == "mul") {
        std::size_t k = 0;
        each_index(out.shape, [&](const std::vector<std::int64_t>& i) {
            out.v[k++] = x.v[static_cast<std::size_t>(offset(x.shape, i))] *
                         in[1]->v[static_cast<std::size_t>(offset(in[1]->shape, i))];
        });
    } else if (s.kind == "matmul") {
        const Tensor& y = *in[1];
        const std::int64_t inner = x.shape.back();
        std::size_t k = 0;
        each_index(out.shape, [&](const std::vector<std::int64_t>& i) {
            double sum = 0;
            for (std::int64_t j = 0; j < inner; ++j) {
                auto xi = i, yi = i;
                xi.back() = j;
                yi[yi.size() - 2] = j;
                sum += x.v[static_cast<std::size_t>(offset(x.shape, xi))] *
                       y.v[static_cast<std::size_t>(offset(y.shape, yi))];
            }
            out.v[k++] = sum;
        });
    } else {
        FAIL("unknown step kind " << s.kind);
    }
    return out;
}

// The plan of `eq` run on random operands of `dims` at batch 2 against a naive einsum over every
// assignment of the labels.
void check_numbers(const std::string& eq, const std::vector<Dims>& dims) {
    INFO(eq);
    const auto plan = planned(eq, dims);
    const std::int64_t batch = 2;
    psrun::Rng rng(11);
    std::vector<Tensor> values;
    for (const auto& dd : dims) {
        Tensor t{nn::concrete(dd, batch), {}};
        for (std::int64_t i = 0; i < count(t.shape); ++i) t.v.push_back(2.0 * rng.uniform() - 1.0);
        values.push_back(std::move(t));
    }
    for (const auto& s : plan.steps) {
        std::vector<const Tensor*> in;
        for (const auto i : s.inputs) in.push_back(&values.at(i));
        values.push_back(run_step(s, in, batch));
    }
    const Tensor& got = values.at(plan.result);
    REQUIRE(got.shape == nn::concrete(plan.dims, batch));
    // The reference: labels by name; each operand's axes and the output's map to labels.
    const auto eqp = nn::parse_einsum(eq, dims.size());
    REQUIRE(eqp);
    std::vector<std::string> names;
    for (const auto& l : plan.labels) names.push_back(l.name);
    std::vector<std::int64_t> extent;
    for (const auto& l : plan.labels) extent.push_back(l.size.at(batch));
    auto axes_of = [&](const std::string& term, std::size_t rank) {
        std::vector<std::size_t> out;
        const std::size_t covered = rank - (term.size() - (term.find('.') == std::string::npos ? 0 : 1));
        std::size_t ellipsis = 0;
        for (const auto& n : names) ellipsis += n.rfind("...", 0) == 0;
        for (const char c : term) {
            if (c != '.') {
                out.push_back(
                    static_cast<std::size_t>(std::find(names.begin(), names.end(), std::string(1, c)) - names.begin()));
                continue;
            }
            for (std::size_t k = ellipsis - covered; k < ellipsis; ++k)
                out.push_back(static_cast<std::size_t>(
                    std::find(names.begin(), names.end(), "..." + std::to_string(k)) - names.begin()));
        }
        return out;
    };
    std::vector<std::vector<std::size_t>> operand_axes;
    for (std::size_t i = 0; i < dims.size(); ++i) operand_axes.push_back(axes_of(eqp->inputs[i], dims[i].size()));
    std::size_t ellipsis = 0;
    for (const auto& n : names) ellipsis += n.rfind("...", 0) == 0;
    const auto out_axes = axes_of(eqp->output, plan.dims.size());
    std::vector<double> want(got.v.size(), 0.0);
    each_index(extent, [&](const std::vector<std::int64_t>& at) {
        double p = 1;
        for (std::size_t i = 0; i < dims.size(); ++i) {
            std::vector<std::int64_t> idx;
            for (const auto l : operand_axes[i]) idx.push_back(at[l]);
            p *= values[i].v[static_cast<std::size_t>(offset(values[i].shape, idx))];
        }
        std::vector<std::int64_t> o;
        for (const auto l : out_axes) o.push_back(at[l]);
        want[static_cast<std::size_t>(offset(got.shape, o))] += p;
    });
    // A label summed from a dim of 1 in every operand adds its one term once: the same.
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(got.v[i] == Approx(want[i]).margin(1e-12));
}

}  // namespace

TEST_CASE("the Einsum plan computes what a naive einsum computes", "[onnx][einsum]") {
    const std::vector<std::pair<std::string, std::vector<Dims>>> cases = {
        {"bhqd,bhkd->bhqk", {{N, d(2), d(3), d(4)}, {N, d(2), d(5), d(4)}}},
        {"bhqk,bhkd->bhqd", {{N, d(2), d(3), d(5)}, {N, d(2), d(5), d(4)}}},
        {"bij,jk->bik", {{N, d(3), d(4)}, {d(4), d(5)}}},
        {"bi,ij->bj", {{N, d(4)}, {d(4), d(3)}}},
        {"ij,bjk->bik", {{d(3), d(4)}, {N, d(4), d(2)}}},
        {"kj,bij->bki", {{d(3), d(4)}, {N, d(2), d(4)}}},
        {"...d,de->...e", {{N, d(3), d(4)}, {d(4), d(2)}}},
        {"...ij,...jk->...ik", {{N, d(1), d(3), d(4)}, {d(2), d(4), d(2)}}},  // broadcast batch letters
        {"bd,bd->b", {{N, d(5)}, {N, d(5)}}},
        {"bi,bj->bij", {{N, d(3)}, {N, d(4)}}},
        {"bi,j->bji", {{N, d(3)}, {d(4)}}},
        {"bij,bk->bk", {{N, d(3), d(4)}, {N, d(5)}}},
        {"bij,bjk", {{N, d(3), d(4)}, {N, d(4), d(2)}}},  // implicit "ik" sums b: refused, below
        {"bjd,bjd->bd", {{N, d(3), d(1)}, {N, d(3), d(4)}}},
        {"bij,bj->bi", {{N, d(3), d(1)}, {N, d(4)}}},  // j: 1 against 4, summed in both
        {"bij->bji", {{N, d(3), d(4)}}},
        {"bij->bj", {{N, d(3), d(4)}}},
        {"...ij->...ji", {{N, d(2), d(3), d(4)}}},
        {"bij->", {{N, d(3), d(4)}}},
        {"Bi,iJ->BJ", {{N, d(3)}, {d(3), d(2)}}},
    };
    for (const auto& [eq, dims] : cases) {
        if (eq == "bij,bjk") {
            auto refused = nn::plan_einsum(eq, dims);
            REQUIRE_FALSE(refused);
            CHECK_THAT(refused.error().message, Catch::Contains("sums over the batch axis"));
            continue;
        }
        check_numbers(eq, dims);
    }
}

}  // namespace onnx_einsum_numbers_test
