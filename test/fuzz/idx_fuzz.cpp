// libFuzzer target for the IDX reader and the CIFAR batch reader: raw or gzip bytes through
// maybe_inflate (the in-memory half of read_maybe_gzip), then a parser. The first byte picks it
// (mod 4): 0 IDX images (ubyte or float32, rank 3 or 4), 1 IDX labels, 2 CIFAR-10, 3 CIFAR-100;
// the rest is the file.
// Contract checked: never a crash; accepted images hold exactly count x C x H x W values of their
// type (and no others), each dimension >= 1, float values finite; accepted labels are not empty;
// CIFAR labels are below the format's classes.
// Built and run by test/fuzz/fuzz.sh idx.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "workerd/data/cifar_reader.h"
#include "workerd/data/idx_reader.h"

namespace {

bool consistent(const psrun::worker::ImageArray& a) {
    using psrun::worker::PixelType;
    if (a.count == 0 || a.channels <= 0 || a.height <= 0 || a.width <= 0) return false;
    const std::size_t values = a.count * a.example_size();
    if (a.type == PixelType::kUint8) return a.u8.size() == values && a.f32.empty();
    if (a.f32.size() != values || !a.u8.empty()) return false;
    for (float v : a.f32)
        if (!std::isfinite(v)) return false;
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::worker;
    if (size == 0) return 0;
    auto bytes = maybe_inflate(std::vector<std::uint8_t>(data + 1, data + size), "fuzz-input");
    if (!bytes) return 0;
    switch (data[0] % 4) {
        case 0: {
            const auto images = parse_idx_images(*bytes, "fuzz-input");
            if (images && !consistent(*images)) __builtin_trap();
            break;
        }
        case 1: {
            const auto labels = parse_idx_labels(*bytes, "fuzz-input");
            if (labels && labels->empty()) __builtin_trap();
            if (labels)
                for (std::int32_t l : *labels)
                    if (l < 0 || l > 255) __builtin_trap();
            break;
        }
        default: {
            const CifarFormat format = data[0] % 4 == 2 ? CifarFormat::kCifar10 : CifarFormat::kCifar100;
            LabeledImages out;
            if (parse_cifar(*bytes, "fuzz-input", format, out)) {
                if (!consistent(out.images) || out.labels.size() != out.images.count || out.images.channels != 3)
                    __builtin_trap();
                for (std::int32_t l : out.labels)
                    if (l < 0 || l >= (format == CifarFormat::kCifar10 ? 10 : 100)) __builtin_trap();
            }
        }
    }
    return 0;
}
