#include "workerd/step_batches.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace psrun::worker {

namespace {

// The network's buffers in a fixed order: per model input its floats, then labels and targets
// (f32), or per model input its ids, then labels (i32). A label-fed input may share a buffer
// with labels(): copying it twice copies the same values.
std::vector<std::span<float>> float_buffers(nn::Network& network) {
    std::vector<std::span<float>> out;
    for (std::size_t i = 0; i < network.model().inputs.size(); ++i) out.push_back(network.input(i));
    out.push_back(network.targets());
    return out;
}

std::vector<std::span<std::int32_t>> id_buffers(nn::Network& network) {
    std::vector<std::span<std::int32_t>> out;
    for (std::size_t i = 0; i < network.model().inputs.size(); ++i) out.push_back(network.input_ids(i));
    out.push_back(network.labels());
    return out;
}

template <typename T>
void resize_all(std::vector<std::vector<T>>& copies, const std::vector<std::span<T>>& buffers, int count) {
    copies.resize(buffers.size());
    for (std::size_t b = 0; b < buffers.size(); ++b)
        copies[b].assign(buffers[b].size() * static_cast<std::size_t>(count), T{});
}

template <typename T>
void copy_in(std::vector<std::vector<T>>& copies, const std::vector<std::span<T>>& buffers, int k) {
    for (std::size_t b = 0; b < buffers.size(); ++b)
        std::copy(buffers[b].begin(), buffers[b].end(),
                  copies[b].begin() + static_cast<std::ptrdiff_t>(buffers[b].size() * k));
}

template <typename T>
void copy_out(const std::vector<std::vector<T>>& copies, const std::vector<std::span<T>>& buffers, int k) {
    for (std::size_t b = 0; b < buffers.size(); ++b) {
        const auto first = copies[b].begin() + static_cast<std::ptrdiff_t>(buffers[b].size() * k);
        std::copy(first, first + static_cast<std::ptrdiff_t>(buffers[b].size()), buffers[b].begin());
    }
}

}  // namespace

StepBatches::StepBatches(nn::Network& network, int count) : count_(count) {
    if (count < 1) throw std::invalid_argument("StepBatches: count < 1");
    resize_all(f32_, float_buffers(network), count);
    resize_all(i32_, id_buffers(network), count);
}

void StepBatches::save(nn::Network& network, int k) {
    if (k < 0 || k >= count_) throw std::out_of_range("StepBatches::save: no micro-batch " + std::to_string(k));
    copy_in(f32_, float_buffers(network), k);
    copy_in(i32_, id_buffers(network), k);
}

void StepBatches::restore(nn::Network& network, int k) const {
    if (k < 0 || k >= count_) throw std::out_of_range("StepBatches::restore: no micro-batch " + std::to_string(k));
    copy_out(f32_, float_buffers(network), k);
    copy_out(i32_, id_buffers(network), k);
}

std::span<std::int32_t> StepBatches::ids(std::size_t input) {
    if (input + 1 >= i32_.size()) throw std::out_of_range("StepBatches::ids: no input " + std::to_string(input));
    return i32_[input];
}

}  // namespace psrun::worker
