// libFuzzer target for the PGM reader (psrun predict's single images): raw bytes through
// parse_pgm. Contract checked: never a crash; an accepted image is one 1-channel uint8 image of
// 1..kMaxImageSide per side holding exactly height x width pixels, and nothing else.
// Built and run by test/fuzz/fuzz.sh pgm.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "workerd/data/pgm_reader.h"
#include "workerd/data/reader_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::worker;
    const std::vector<std::uint8_t> bytes(data, data + size);
    const auto image = parse_pgm(bytes, "fuzz-input");
    if (!image) return 0;
    if (image->count != 1 || image->channels != 1 || image->type != PixelType::kUint8) __builtin_trap();
    if (image->height < 1 || image->width < 1 || image->height > static_cast<int>(kMaxImageSide) ||
        image->width > static_cast<int>(kMaxImageSide))
        __builtin_trap();
    if (image->u8.size() != image->example_size() || !image->f32.empty()) __builtin_trap();
    return 0;
}
