#include "workerd/data/image_encoder.h"

#include <png.h>
#include <turbojpeg.h>

#include <cstring>

namespace psrun::worker {

Result<std::vector<std::uint8_t>> encode_jpeg(std::span<const std::uint8_t> hwc, int width, int height, int channels,
                                              int quality) {
    if ((channels != 1 && channels != 3) || width < 1 || height < 1 ||
        hwc.size() !=
            static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * static_cast<std::size_t>(channels))
        return make_error(ErrorCode::kInvalidArgument, "encode_jpeg: bad image shape");
    tjhandle h = tjInitCompress();
    if (h == nullptr) return make_error(ErrorCode::kIo, "tjInitCompress failed");
    unsigned char* out = nullptr;
    unsigned long size = 0;
    const int rc = tjCompress2(h, hwc.data(), width, 0, height, channels == 3 ? TJPF_RGB : TJPF_GRAY, &out, &size,
                               channels == 3 ? TJSAMP_420 : TJSAMP_GRAY, quality, 0);
    std::vector<std::uint8_t> bytes;
    if (rc == 0) bytes.assign(out, out + size);
    const std::string message = rc == 0 ? "" : tjGetErrorStr2(h);
    tjFree(out);
    tjDestroy(h);
    if (rc != 0) return make_error(ErrorCode::kIo, "JPEG compression failed: " + message);
    return bytes;
}

Result<std::vector<std::uint8_t>> encode_png(std::span<const std::uint8_t> hwc, int width, int height, int channels) {
    if ((channels != 1 && channels != 3) || width < 1 || height < 1 ||
        hwc.size() !=
            static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * static_cast<std::size_t>(channels))
        return make_error(ErrorCode::kInvalidArgument, "encode_png: bad image shape");
    png_image png;
    std::memset(&png, 0, sizeof png);
    png.version = PNG_IMAGE_VERSION;
    png.width = static_cast<png_uint_32>(width);
    png.height = static_cast<png_uint_32>(height);
    png.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    png_alloc_size_t size = 0;
    if (!png_image_write_to_memory(&png, nullptr, &size, 0, hwc.data(), 0, nullptr))
        return make_error(ErrorCode::kIo, std::string("PNG encoding failed: ") + png.message);
    std::vector<std::uint8_t> bytes(size);
    if (!png_image_write_to_memory(&png, bytes.data(), &size, 0, hwc.data(), 0, nullptr))
        return make_error(ErrorCode::kIo, std::string("PNG encoding failed: ") + png.message);
    bytes.resize(size);
    return bytes;
}

}  // namespace psrun::worker
