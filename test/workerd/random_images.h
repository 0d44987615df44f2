// Synthetic 28x28 labelled images for tests that need data but not MNIST's content.
#pragma once

#include <cstdint>

#include "common/rng.h"
#include "workerd/data/labeled_images.h"

namespace psrun::worker::test {

// `count` images of uniform random pixels and labels, reproducible from `seed`.
inline LabeledImages random_images(std::size_t count, std::uint64_t seed) {
    LabeledImages d;
    d.images.count = count;
    d.images.height = 28;
    d.images.width = 28;
    d.images.u8.resize(count * 784);
    d.labels.resize(count);
    Rng rng(seed);
    for (auto& p : d.images.u8) p = static_cast<std::uint8_t>(rng.below(256));
    for (auto& l : d.labels) l = static_cast<std::int32_t>(rng.below(10));
    return d;
}

}  // namespace psrun::worker::test
