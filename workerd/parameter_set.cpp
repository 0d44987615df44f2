#include "workerd/parameter_set.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <stdexcept>

#include "workerd/nn/model_summary.h"

namespace psrun::worker {

std::vector<TensorInfo> model_tensors(const nn::ModelDescription& model) {
    std::vector<TensorInfo> out;
    for (const auto& t : nn::parameter_tensors(model))
        out.push_back(TensorInfo{t.name, t.shape, static_cast<std::size_t>(t.offset), static_cast<std::size_t>(t.size),
                                 t.cls == nn::TensorClass::kState ? TensorClass::kState : TensorClass::kTrainable});
    return out;
}

std::vector<TensorSpec> wire_tensors(const std::vector<TensorInfo>& tensors) {
    std::vector<TensorSpec> out;
    for (const auto& t : tensors) {
        TensorSpec spec{t.name, {}};
        spec.tensor_class = t.tensor_class;
        for (auto d : t.shape) spec.shape.push_back(static_cast<std::uint32_t>(d));
        if (spec.shape.empty()) spec.shape.push_back(1);  // a scalar: psd's tensors (and files) have rank >= 1
        out.push_back(std::move(spec));
    }
    return out;
}

namespace {
std::size_t total_size(const std::vector<TensorInfo>& tensors) {
    return tensors.empty() ? 0 : tensors.back().offset + tensors.back().size;
}
}  // namespace

void ParameterSet::Free::operator()(float* p) const {
    if (owned) std::free(p);
}

ParameterSet::ParameterSet(std::vector<TensorInfo> tensors, std::size_t tail)
    : tensors_(std::move(tensors)), size_(total_size(tensors_)), tail_(tail), data_(nullptr, Free{true}) {
    const std::size_t bytes = std::max<std::size_t>(64, ((size_ + tail_) * sizeof(float) + 63) / 64 * 64);
    data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    if (!data_) throw std::bad_alloc();
    std::fill(with_tail().begin(), with_tail().end(), 0.0f);
}

ParameterSet::ParameterSet(std::vector<TensorInfo> tensors, std::span<float> memory)
    : tensors_(std::move(tensors)), size_(total_size(tensors_)), data_(nullptr, Free{false}) {
    if (memory.size() != size_ || reinterpret_cast<std::uintptr_t>(memory.data()) % 64 != 0)
        throw std::invalid_argument("ParameterSet: the viewed buffer has the wrong size or alignment");
    data_.reset(memory.data());
}

std::span<float> ParameterSet::tensor(std::size_t index) {
    const auto& t = tensors_.at(index);
    return {data_.get() + t.offset, t.size};
}

std::span<const float> ParameterSet::tensor(std::size_t index) const {
    const auto& t = tensors_.at(index);
    return {data_.get() + t.offset, t.size};
}

void ParameterSet::fill(float value) { std::fill(all().begin(), all().end(), value); }

}  // namespace psrun::worker
