#include "workerd/parameter_set.h"

#include <stdexcept>

#include <algorithm>
#include <cstdlib>
#include <new>

#include "workerd/rng.h"

namespace psrun::worker {

void ParameterSet::Free::operator()(float* p) const {
    if (owned) std::free(p);
}

ParameterSet::ParameterSet(const ModelShape& s) : data_(nullptr, Free{true}) {
    add_tensors(s);
    const std::size_t bytes = (size_ * sizeof(float) + 63) / 64 * 64;
    data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    if (!data_) throw std::bad_alloc();
    fill(0.0f);
}

ParameterSet::ParameterSet(const ModelShape& s, std::span<float> memory) : data_(nullptr, Free{false}) {
    add_tensors(s);
    if (memory.size() != size_ || reinterpret_cast<std::uintptr_t>(memory.data()) % 64 != 0)
        throw std::invalid_argument("ParameterSet: the viewed buffer has the wrong size or alignment");
    data_.reset(memory.data());
}

void ParameterSet::add_tensors(const ModelShape& s) {
    const std::int64_t k = s.kernel;
    auto add = [&](std::string name, std::vector<std::int64_t> shape) {
        std::size_t n = 1;
        for (auto d : shape) n *= static_cast<std::size_t>(d);
        tensors_.push_back(TensorInfo{std::move(name), std::move(shape), size_, n});
        size_ += n;
    };
    add("conv1/w", {s.conv1_channels, 1, k, k});
    add("conv1/b", {s.conv1_channels});
    add("conv2/w", {s.conv2_channels, s.conv1_channels, k, k});
    add("conv2/b", {s.conv2_channels});
    add("fc1/w", {s.fc1_units, s.flat_features()});
    add("fc1/b", {s.fc1_units});
    add("fc2/w", {s.classes, s.fc1_units});
    add("fc2/b", {s.classes});
}

std::span<float> ParameterSet::tensor(int index) {
    const auto& t = tensors_.at(static_cast<std::size_t>(index));
    return {data_.get() + t.offset, t.size};
}

std::span<const float> ParameterSet::tensor(int index) const {
    const auto& t = tensors_.at(static_cast<std::size_t>(index));
    return {data_.get() + t.offset, t.size};
}

void ParameterSet::init_tutorial(std::uint64_t seed) {
    for (int i = 0; i < kCount; ++i) {
        auto span = tensor(i);
        if (tensors_[static_cast<std::size_t>(i)].shape.size() == 1) {
            std::fill(span.begin(), span.end(), 0.1f);
        } else {
            Rng rng(seed, static_cast<std::uint64_t>(i));
            for (auto& v : span) v = rng.truncated_normal(0.1f);
        }
    }
}

void ParameterSet::fill(float value) { std::fill(all().begin(), all().end(), value); }

}  // namespace psrun::worker
