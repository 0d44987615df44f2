#include "workerd/nn/ops/kernel_views.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "common/wire_precision.h"
#include "workerd/nn/kernels/broadcast_sum.h"

namespace psrun::nn {

using namespace dnnl;

MemDims padded(const MemDims& dims, std::size_t rank) {
    if (dims.size() > rank)
        throw std::logic_error("padded: rank " + std::to_string(dims.size()) + " > " + std::to_string(rank));
    MemDims out(rank - dims.size(), 1);
    out.insert(out.end(), dims.begin(), dims.end());
    return out;
}

MemDims plain_strides(const MemDims& dims) {
    MemDims s(dims.size(), 1);
    for (std::size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
    return s;
}

std::int64_t element_count(const MemDims& dims) {
    std::int64_t n = 1;
    for (const auto d : dims) n *= d;
    return n;
}

memory::desc broadcast_desc(const MemDims& from, const MemDims& to, memory::data_type type) {
    if (from.size() != to.size()) throw std::logic_error("broadcast_desc: ranks differ");
    MemDims strides = plain_strides(from);
    for (std::size_t i = 0; i < to.size(); ++i) {
        if (from[i] == to[i]) continue;
        if (from[i] != 1) throw std::logic_error("broadcast_desc: dims do not broadcast");
        strides[i] = 0;
    }
    return memory::desc(to, type, strides);
}

memory::desc strided_desc(const MemDims& dims, memory::data_type type, const MemDims& strides, std::int64_t offset) {
    memory::desc d(dims, type, strides);
    d.data.offset0 = offset;
    return d;
}

memory::desc with_type(const memory::desc& desc, memory::data_type type) {
    memory::desc d = desc;
    d.data.data_type = static_cast<dnnl_data_type_t>(type);
    return d;
}

View view_of(const memory& base, const memory::desc& desc, const engine& engine) {
    return View{memory(desc, engine, base.get_data_handle()), base};
}

Op rebased(std::vector<View> views, Op op) {
    if (views.empty()) return op;
    return [views = std::move(views), op = std::move(op)]() {
        for (const auto& v : views)
            if (v.view.get_data_handle() != v.base.get_data_handle()) v.view.set_data_handle(v.base.get_data_handle());
        op();
    };
}

Op run_primitive(const KernelBuilder& b, const primitive& p, std::unordered_map<int, memory> args,
                 std::vector<View> views) {
    const stream s = b.context().stream;
    return rebased(std::move(views), [p, s, args = std::move(args)]() mutable { p.execute(s, args); });
}

Op run_reorder(const KernelBuilder& b, const memory& from, const memory& to, std::vector<View> views, float scale) {
    primitive_attr attr;
    if (scale != 1.0f) attr.set_output_scales(0, {scale});
    reorder r(reorder::primitive_desc(from, to, attr));
    return run_primitive(b, r, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, std::move(views));
}

Op run_zero(const memory& m) {
    return [m] { std::memset(m.get_data_handle(), 0, m.get_desc().get_size()); };
}

Op run_fill(const memory& m, float value) {
    if (m.get_desc().data_type() == memory::data_type::bf16) {
        const std::uint16_t bits = wire::to_bf16(value);
        return [m, bits] {
            auto* p = static_cast<std::uint16_t*>(m.get_data_handle());
            std::fill(p, p + m.get_desc().get_size() / sizeof(std::uint16_t), bits);
        };
    }
    return [m, value] {
        auto* p = static_cast<float*>(m.get_data_handle());
        std::fill(p, p + m.get_desc().get_size() / sizeof(float), value);
    };
}

namespace {

bool plain_f32(const memory& m) { return m.get_desc() == plain_desc(m.get_desc().dims(), memory::data_type::f32); }

// The hand sum (kernels/broadcast_sum.h) of `from` [times `other`], both of from_dims, into
// to_base, reading the memories' data handles when it runs (a base may move between runs).
Op hand_sum(const MemDims& from_dims, const memory& from, const memory& other, const memory& to_base,
            const MemDims& to_dims, float scale) {
    auto sum = std::make_shared<kernels::BroadcastSum>(from_dims, to_dims);
    return [sum, from, other, to_base, scale] {
        sum->run(static_cast<const float*>(from.get_data_handle()),
                 other ? static_cast<const float*>(other.get_data_handle()) : nullptr,
                 static_cast<float*>(to_base.get_data_handle()), scale);
    };
}

}  // namespace

Op sum_to(const KernelBuilder& b, const memory& from, const memory& to_base, const MemDims& to_dims, float scale) {
    const auto& engine = b.context().engine;
    const MemDims& from_dims = from.get_desc().dims();
    const View to = view_of(to_base, plain_desc(to_dims, memory::data_type::f32), engine);
    if (from_dims == to_dims) return run_reorder(b, from, to.view, {to}, scale);
    if (plain_f32(from)) return hand_sum(from_dims, from, memory(), to_base, to_dims, scale);
    primitive_attr attr;
    if (scale != 1.0f) {
        post_ops po;
        po.append_eltwise(1.0f, algorithm::eltwise_linear, scale, 0.0f);
        attr.set_post_ops(po);
    }
    reduction::primitive_desc pd(
        reduction::desc(algorithm::reduction_sum, from.get_desc(), to.view.get_desc(), 0.f, 0.f), attr, engine);
    return run_primitive(b, reduction(pd), {{DNNL_ARG_SRC, from}, {DNNL_ARG_DST, to.view}}, {to});
}

Op sum_product_to(const View& from, const View& other, const memory& to_base, const MemDims& to_dims, float scale) {
    const memory::desc& f = from.view.get_desc();
    if (f != plain_desc(f.dims(), memory::data_type::f32) || other.view.get_desc() != f)
        throw std::logic_error("sum_product_to: the factors must be f32 plain of one shape");
    return hand_sum(f.dims(), from.base, other.base, to_base, to_dims, scale);
}

int axis_attr(const KernelBuilder& b) {
    const auto rank = static_cast<std::int64_t>(b.input_dims(0).size());
    const auto axis = b.node().attrs.at("axis").get<std::int64_t>();
    return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace psrun::nn
