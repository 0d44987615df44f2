#include "test/nn/engine_test_util.h"

#include <algorithm>

#include "workerd/nn/activation_layer.h"
#include "workerd/nn/conv2d_layer.h"
#include "workerd/nn/dense_layer.h"
#include "workerd/nn/dropout_layer.h"
#include "workerd/nn/pool_layer.h"

namespace psrun::nn::test {

using dnnl::memory;

namespace {

std::vector<float> read_plain(const memory& m, dnnl::stream& strm, const dnnl::engine& eng) {
    const auto dims = m.get_desc().dims();
    std::size_t count = 1;
    for (auto d : dims) count *= static_cast<std::size_t>(d);
    std::vector<float> out(count);
    memory plain({dims, memory::data_type::f32, plain_tag(static_cast<int>(dims.size()))}, eng, out.data());
    dnnl::reorder(m, plain).execute(strm, const_cast<memory&>(m), plain);
    strm.wait();
    return out;
}

void write_plain(const std::vector<float>& v, const memory& m, dnnl::stream& strm, const dnnl::engine& eng) {
    const auto dims = m.get_desc().dims();
    memory plain({dims, memory::data_type::f32, plain_tag(static_cast<int>(dims.size()))}, eng,
                 const_cast<float*>(v.data()));
    memory target = m;
    dnnl::reorder(plain, target).execute(strm, plain, target);
    strm.wait();
}

}  // namespace

LayerHarness::LayerHarness(const ModelDescription& model, int first, int count, std::int64_t batch,
                           Precision precision) {
    const std::span<const LayerSpec> specs(model.layers);
    const auto sub = specs.subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(count));
    const LayerContext ctx{eng_, strm_, batch, precision, true};
    const LayerSpec& s = sub.front();
    switch (s.kind) {
        case LayerKind::kConv2d: layer_ = std::make_unique<Conv2dLayer>(sub, first, ctx, 0); break;
        case LayerKind::kDense:
            layer_ = std::make_unique<DenseLayer>(sub, first, ctx, 0, ctx.activation_type());
            break;
        case LayerKind::kMaxPool:
        case LayerKind::kAvgPool: layer_ = std::make_unique<PoolLayer>(sub, first, ctx, 0); break;
        case LayerKind::kDropout: layer_ = std::make_unique<DropoutLayer>(sub, first, ctx, 0, 0); break;
        default: layer_ = std::make_unique<ActivationLayer>(sub, first, ctx, 0); break;
    }
    params.assign(static_cast<std::size_t>(s.param_count), 0.0f);
    grads.assign(params.size(), -7.0f);  // must be overwritten
    const auto dims = activation_dims(s.input, batch);
    std::size_t n = 1;
    for (auto d : dims) n *= static_cast<std::size_t>(d);
    src_host_.assign(n, 0.0f);
    diff_src_host_.assign(n, -7.0f);
    const memory::desc plain(dims, memory::data_type::f32, plain_tag(static_cast<int>(dims.size())));
    src_ = memory(plain, eng_, src_host_.data());
    diff_src_ = memory(plain, eng_, diff_src_host_.data());
    layer_->setup(src_, diff_src_, params, grads);
}

std::vector<float> LayerHarness::forward(const std::vector<float>& src, bool training) {
    REQUIRE(src.size() == src_host_.size());
    std::copy(src.begin(), src.end(), src_host_.begin());  // the memory views this storage
    layer_->forward(training);
    strm_.wait();
    return read_plain(layer_->dst(), strm_, eng_);
}

std::vector<float> LayerHarness::backward(const std::vector<float>& diff_dst) {
    write_plain(diff_dst, layer_->diff_dst(), strm_, eng_);
    layer_->backward();
    strm_.wait();
    return diff_src_host_;
}

}  // namespace psrun::nn::test
