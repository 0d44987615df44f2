// Synthetic 28x28 labelled images for tests that need data but not MNIST's content.
#pragma once

#include <cstdint>

#include "workerd/idx_reader.h"
#include "workerd/rng.h"

namespace psrun::worker::test {

// `count` images of uniform random pixels and labels, reproducible from `seed`.
inline LabeledImages random_images(std::size_t count, std::uint64_t seed) {
    LabeledImages d;
    d.images.count = count;
    d.images.rows = 28;
    d.images.cols = 28;
    d.images.pixels.resize(count * 784);
    d.labels.labels.resize(count);
    Rng rng(seed);
    for (auto& p : d.images.pixels) p = static_cast<std::uint8_t>(rng.below(256));
    for (auto& l : d.labels.labels) l = static_cast<std::uint8_t>(rng.below(10));
    return d;
}

}  // namespace psrun::worker::test
