// Image augmentation as CIFAR recipes use it (torchvision's RandomCrop(size, padding=P) and
// RandomHorizontalFlip()): `--augment flip,crop=P`. Each training image is shifted by a random
// (dy, dx) in [-P, P]^2 with zeros brought in at the borders (the crop of a P-padded image at a
// random corner) and mirrored left-right with probability 1/2. The draws come from
// Rng(seed, worker, batch index) (common/rng.h), so a worker's augmentation is reproducible and
// workers differ. Test images are never augmented. Not thread-safe; apply() runs on the calling
// thread's OpenMP team (the Trainer calls it on its batch thread, workerd/prefetch_source.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

struct AugmentSpec {
    bool flip = false;
    int crop_padding = 0;  // P: shifts in [-P, P]; 0: no crop
    bool enabled() const { return flip || crop_padding > 0; }
};

// "none", or a comma list of "flip" and "crop=P" (P in 1..64). kInvalidArgument naming the part.
Result<AugmentSpec> parse_augment(const std::string& text);

class Augmenter {
  public:
    Augmenter(AugmentSpec spec, std::uint64_t seed, std::uint32_t worker);
    // Augments `images` ([examples, channels, height, width] floats) in place, with the draws of
    // batch `step` (the Trainer passes the batch's index: examples before it / batch size).
    void apply(std::span<float> images, std::int64_t examples, std::int64_t channels, std::int64_t height,
               std::int64_t width, std::uint64_t step);

  private:
    AugmentSpec spec_;
    std::uint64_t seed_;
    std::vector<float> scratch_;  // one image per OpenMP thread
};

}  // namespace psrun::worker
