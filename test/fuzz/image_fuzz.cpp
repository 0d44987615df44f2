// libFuzzer target for image decoding: the input is one image file (JPEG through libjpeg-turbo,
// PNG through libpng's simplified API, PGM by our reader, told apart by content), decoded for
// three targets (1 x 28 x 28 crop, 3 x 16 x 24 pad, 3 x 7 x 5 stretch).
// Contract checked: never a crash; a decode that succeeds fills exactly the target's bytes and
// reports a size of at least 1 x 1.
// Built and run by test/fuzz/fuzz.sh image.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "workerd/data/image_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::worker;
    static ImageDecoder decoder;  // one per thread, as a stream's decoding threads hold
    const std::span<const std::uint8_t> bytes(data, size);
    const ImageTarget targets[] = {
        {1, 28, 28, ResizeMode::kCrop}, {3, 16, 24, ResizeMode::kPad}, {3, 7, 5, ResizeMode::kStretch}};
    for (const ImageTarget& t : targets) {
        std::vector<std::uint8_t> out(static_cast<std::size_t>(t.channels * t.height * t.width) + 1, 0xA5);
        auto r = decoder.decode(bytes, t, std::span<std::uint8_t>(out).first(out.size() - 1), "fuzz-input");
        if (out.back() != 0xA5) __builtin_trap();  // nothing written past the target
        if (r && (r->width < 1 || r->height < 1)) __builtin_trap();
    }
    return 0;
}
