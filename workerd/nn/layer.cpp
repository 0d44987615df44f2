#include "workerd/nn/layer.h"

#include <stdexcept>

namespace psrun::nn {

using dnnl::memory;
using Tag = memory::format_tag;

const char* to_string(Precision precision) {
    return precision == Precision::kBf16 ? "bf16" : "f32";
}

bool engine_bf16_supported() {
    const auto isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

memory::dims activation_dims(const ActivationShape& shape, std::int64_t batch) {
    if (shape.flat) return {batch, shape.channels};
    return {batch, shape.channels, shape.height, shape.width};
}

Tag plain_tag(int ndims) {
    switch (ndims) {
        case 1: return Tag::a;
        case 2: return Tag::ab;
        case 3: return Tag::abc;
        case 4: return Tag::abcd;
        default: throw std::runtime_error("unsupported tensor rank " + std::to_string(ndims));
    }
}

const char* kind_name(LayerKind kind) { return layer_kind_ops(kind).name.data(); }

Layer::Layer(std::span<const LayerSpec> specs, int index, const LayerContext& context,
             std::size_t param_offset)
    : specs_(specs.begin(), specs.end()), index_(index), ctx_(context),
      param_offset_(param_offset) {
    if (specs_.empty()) throw std::logic_error("a layer covers at least one spec");
}

Layer::~Layer() = default;

void Layer::setup(const memory& src, const memory& diff_src, std::span<const float> params,
                  std::span<float> grads) {
    params_ = params;
    grads_ = grads;
    build(src, diff_src);
}

void Layer::forward(bool /*training*/) {
    for (const auto& op : fwd_ops_) op();
}

void Layer::backward() {
    for (const auto& op : bwd_ops_) op();
}

void Layer::set_step_seed(std::uint64_t /*seed*/) {}

void Layer::set_gradient_buffer(std::span<float> grads) {
    grads_ = grads;
    for (auto& [m, offset] : grad_memories_) m.set_data_handle(grads.data() + offset);
}

std::string Layer::kind_label() const {
    std::string label = kind_name(kind());
    for (std::size_t i = 1; i < specs_.size(); ++i) label += std::string("+") + kind_name(specs_[i].kind);
    return label;
}

void Layer::add(Ops& ops, const dnnl::primitive& p, std::unordered_map<int, memory> args) {
    ops.push_back([this, p, args]() { p.execute(ctx_.stream, args); });
}

memory Layer::convert(Ops& ops, const memory& src, const memory::desc& want) {
    if (src.get_desc() == want) return src;
    memory out(want, ctx_.engine);
    add(ops, dnnl::reorder(src, out), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, out}});
    return out;
}

memory Layer::produce_into(Ops& after, const memory& dst, const memory::desc& have) {
    if (dst.get_desc() == have) return dst;
    memory tmp(have, ctx_.engine);
    add(after, dnnl::reorder(tmp, dst), {{DNNL_ARG_FROM, tmp}, {DNNL_ARG_TO, dst}});
    return tmp;
}

namespace {

std::size_t tensor_offset(const LayerSpec& spec, std::size_t base, int tensor) {
    if (tensor < 0 || static_cast<std::size_t>(tensor) >= spec.params.size())
        throw std::logic_error("layer " + spec.name + " has no parameter tensor " + std::to_string(tensor));
    std::size_t offset = base;
    for (int i = 0; i < tensor; ++i) offset += static_cast<std::size_t>(spec.params[static_cast<std::size_t>(i)].size);
    return offset;
}

}  // namespace

memory Layer::param(int tensor, const memory::dims& dims, Tag tag) {
    const std::size_t offset = tensor_offset(spec(), param_offset_, tensor);
    return memory(md(dims, memory::data_type::f32, tag), ctx_.engine,
                  const_cast<float*>(params_.data() + offset));
}

memory Layer::grad(int tensor, const memory::dims& dims, Tag tag) {
    const std::size_t offset = tensor_offset(spec(), param_offset_, tensor);
    memory m(md(dims, memory::data_type::f32, tag), ctx_.engine, grads_.data() + offset);
    grad_memories_.emplace_back(m, offset);
    return m;
}

void Layer::allocate_output(const memory::desc& desc) {
    dst_ = memory(desc, ctx_.engine);
    if (ctx_.training) diff_dst_ = memory(desc, ctx_.engine);
}

memory Layer::as_image(const memory& m) const {
    if (!m) return m;
    const auto desc = m.get_desc();
    const auto dims = desc.dims();
    if (dims.size() == 4) return m;
    if (dims.size() != 2 || desc != memory::desc(dims, desc.data_type(), Tag::nc))
        throw std::runtime_error("cannot view the input as an image");
    return memory(md({dims[0], dims[1], 1, 1}, desc.data_type(), Tag::nchw), ctx_.engine,
                  m.get_data_handle());
}

dnnl::primitive_attr Layer::fused_relu_attr() const {
    dnnl::primitive_attr attr;
    if (fused_relu()) {
        dnnl::post_ops po;
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
        attr.set_post_ops(po);
    }
    return attr;
}

void Layer::add_fused_relu_backward(Ops& ops) {
    using dnnl::algorithm;
    const auto desc = dst_.get_desc();
    dnnl::eltwise_forward::primitive_desc hint(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, algorithm::eltwise_relu_use_dst_for_bwd,
                                    desc, 0.0f, 0.0f),
        ctx_.engine);
    dnnl::eltwise_backward::primitive_desc pd(
        dnnl::eltwise_backward::desc(algorithm::eltwise_relu_use_dst_for_bwd, desc, desc, 0.0f, 0.0f),
        ctx_.engine, hint);
    add(ops, dnnl::eltwise_backward(pd),
        {{DNNL_ARG_DST, dst_}, {DNNL_ARG_DIFF_DST, diff_dst_}, {DNNL_ARG_DIFF_SRC, diff_dst_}});
    note("relu bwd", pd);
}

void Layer::note(const std::string& what, const dnnl::primitive_desc_base& pd) {
    impls_.push_back(what + ": " + pd.impl_info_str());
}

}  // namespace psrun::nn
