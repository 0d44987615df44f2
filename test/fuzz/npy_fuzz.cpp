// libFuzzer target for the NumPy .npy reader: raw or gzip bytes through maybe_inflate, then the
// images, labels or raw-ids parser. The first byte picks the parser (byte % 3: 0 images, 1 labels,
// 2 raw ids, npy_values.h) and, for images, the layout ((byte / 3) % 3: auto, nchw, nhwc); the
// rest is the file; (byte / 9) % 2 == 1 gives the images parser a model's dims (3x8x8).
// Contract checked: never a crash; accepted images hold exactly count x C x H x W values of their
// type (and no others), each dimension >= 1, float values finite; accepted labels are not empty;
// accepted raw ids are exactly rows x cols values.
// Built and run by test/fuzz/fuzz.sh npy.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "workerd/data/npy_reader.h"
#include "workerd/data/npy_values.h"
#include "workerd/data/reader_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::worker;
    if (size == 0) return 0;
    auto bytes = maybe_inflate(std::vector<std::uint8_t>(data + 1, data + size), "fuzz-input");
    if (!bytes) return 0;
    if (data[0] % 3 == 2) {
        const auto h = parse_npy_header(*bytes, "fuzz-input");
        if (!h) return 0;
        const auto rows = npy_rows(*bytes, *h, "fuzz-input");
        const auto ids = npy_as_raw_ids(*bytes, *h, "fuzz-input");
        if (ids && (!rows || ids->size() != rows->rows * rows->cols)) __builtin_trap();
    } else if (data[0] % 3 == 0) {
        const ImageLayout layouts[] = {ImageLayout::kAuto, ImageLayout::kNchw, ImageLayout::kNhwc};
        const ImageDims model{3, 8, 8};  // a model's dims, which may decide an auto layout
        const auto a = parse_npy_images(*bytes, "fuzz-input", layouts[(data[0] / 3) % 3],
                                        (data[0] / 9) % 2 == 1 ? &model : nullptr);
        if (!a) return 0;
        if (a->count == 0 || a->channels <= 0 || a->height <= 0 || a->width <= 0) __builtin_trap();
        const std::size_t values = a->count * a->example_size();
        if (a->type == PixelType::kUint8 ? (a->u8.size() != values || !a->f32.empty())
                                         : (a->f32.size() != values || !a->u8.empty()))
            __builtin_trap();
        for (float v : a->f32)
            if (!std::isfinite(v)) __builtin_trap();
    } else {
        const auto labels = parse_npy_labels(*bytes, "fuzz-input");
        if (labels && labels->empty()) __builtin_trap();
    }
    return 0;
}
