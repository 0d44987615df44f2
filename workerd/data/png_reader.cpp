#include "workerd/data/png_reader.h"

#include <png.h>

#include <cstring>

#include "workerd/data/reader_common.h"

namespace psrun::worker {

bool looks_like_png(std::span<const std::uint8_t> bytes) {
    return bytes.size() >= 8 && png_sig_cmp(bytes.data(), 0, 8) == 0;
}

Result<PngInfo> decode_png(std::span<const std::uint8_t> bytes, const std::string& path, int channels,
                           std::vector<std::uint8_t>& hwc) {
    if (channels != 1 && channels != 3)
        return bad_file(path, "a PNG can feed a model of 1 or 3 input channels, not " + std::to_string(channels));
    if (!looks_like_png(bytes)) return bad_file(path, "not a PNG image (no PNG signature)");
    png_image png;
    std::memset(&png, 0, sizeof png);
    png.version = PNG_IMAGE_VERSION;
    if (png_image_begin_read_from_memory(&png, bytes.data(), bytes.size()) == 0)
        return bad_file(path, std::string("unreadable PNG: ") + png.message);
    PngInfo info;
    info.file_color = (png.format & PNG_FORMAT_FLAG_COLOR) != 0;
    info.file_alpha = (png.format & PNG_FORMAT_FLAG_ALPHA) != 0;
    if (png.width == 0 || png.height == 0 || png.width > kMaxImageSide || png.height > kMaxImageSide) {
        png_image_free(&png);
        return bad_file(path, "PNG of " + std::to_string(png.width) + "x" + std::to_string(png.height) +
                                  " pixels (sides of 1.." + std::to_string(kMaxImageSide) + " are read)");
    }
    info.width = static_cast<int>(png.width);
    info.height = static_cast<int>(png.height);
    png.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    hwc.resize(PNG_IMAGE_SIZE(png));
    // background nullptr: alpha is composited onto black; row stride 0: packed rows.
    if (png_image_finish_read(&png, nullptr, hwc.data(), 0, nullptr) == 0) {
        const std::string message = png.message;
        png_image_free(&png);
        return bad_file(path, "unreadable PNG: " + message);
    }
    return info;
}

Result<PngImage> parse_png(const std::vector<std::uint8_t>& bytes, const std::string& path, int channels) {
    std::vector<std::uint8_t> interleaved;
    PSRUN_TRY_ASSIGN(auto info, decode_png(bytes, path, channels, interleaved));
    PngImage out;
    out.file_color = info.file_color;
    out.converted = out.file_color != (channels == 3);
    const std::size_t w = static_cast<std::size_t>(info.width), h = static_cast<std::size_t>(info.height),
                      c = static_cast<std::size_t>(channels);
    ImageArray& a = out.image;
    a.count = 1;
    a.channels = channels;
    a.height = static_cast<int>(h);
    a.width = static_cast<int>(w);
    a.type = PixelType::kUint8;
    a.u8.resize(w * h * c);
    // libpng gives HWC; the engine reads CHW.
    for (std::size_t y = 0; y < h; ++y)
        for (std::size_t x = 0; x < w; ++x)
            for (std::size_t k = 0; k < c; ++k) a.u8[k * h * w + y * w + x] = interleaved[(y * w + x) * c + k];
    return out;
}

}  // namespace psrun::worker
