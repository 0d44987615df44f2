#include "workerd/data/image_decoder.h"

#include <cmath>

#include "workerd/data/pgm_reader.h"
#include "workerd/data/png_reader.h"
#include "workerd/data/reader_common.h"

namespace psrun::worker {
namespace {

// PGM pixels (one channel) into hwc_ with `channels` channels.
Result<void> decode_pgm(std::span<const std::uint8_t> bytes, const std::string& what, int channels,
                        std::vector<std::uint8_t>& hwc, int& w, int& h) {
    PSRUN_TRY_ASSIGN(auto img, parse_pgm(std::vector<std::uint8_t>(bytes.begin(), bytes.end()), what));
    w = img.width;
    h = img.height;
    const std::size_t n = img.u8.size(), c = static_cast<std::size_t>(channels);
    hwc.resize(n * c);
    for (std::size_t p = 0; p < n; ++p)
        for (std::size_t k = 0; k < c; ++k) hwc[p * c + k] = img.u8[p];
    return {};
}

}  // namespace

ImageFormat sniff_image(std::span<const std::uint8_t> bytes) {
    if (looks_like_jpeg(bytes)) return ImageFormat::kJpeg;
    if (looks_like_png(bytes)) return ImageFormat::kPng;
    if (bytes.size() >= 3 && bytes[0] == 'P' && (bytes[1] == '5' || bytes[1] == '2') &&
        (bytes[2] == ' ' || bytes[2] == '\n' || bytes[2] == '\r' || bytes[2] == '\t'))
        return ImageFormat::kPgm;
    return ImageFormat::kUnknown;
}

const char* to_string(ImageFormat format) {
    switch (format) {
        case ImageFormat::kJpeg: return "JPEG";
        case ImageFormat::kPng: return "PNG";
        case ImageFormat::kPgm: return "PGM";
        case ImageFormat::kUnknown: break;
    }
    return "unknown";
}

Result<DecodedImage> ImageDecoder::decode(std::span<const std::uint8_t> bytes, const ImageTarget& target,
                                          std::span<std::uint8_t> out, const std::string& what) {
    if (target.channels != 1 && target.channels != 3)
        return bad_file(what,
                        "images can feed a model of 1 or 3 input channels, not " + std::to_string(target.channels));
    DecodedImage d;
    d.format = sniff_image(bytes);
    int w = 0, h = 0;
    switch (d.format) {
        case ImageFormat::kJpeg: {
            PSRUN_TRY_ASSIGN(auto info, jpeg_.decode(bytes, what, target.channels, target.width, target.height,
                                                     target.resize, hwc_));
            w = info.decoded_width;
            h = info.decoded_height;
            d.width = info.width;
            d.height = info.height;
            d.converted = info.file_color != (target.channels == 3);
            d.resized = info.width != target.width || info.height != target.height;
            break;
        }
        case ImageFormat::kPng: {
            PSRUN_TRY_ASSIGN(auto info, decode_png(bytes, what, target.channels, hwc_));
            w = info.width;
            h = info.height;
            d.converted = info.file_color != (target.channels == 3);
            break;
        }
        case ImageFormat::kPgm: {
            PSRUN_TRY(decode_pgm(bytes, what, target.channels, hwc_, w, h));
            d.converted = target.channels == 3;
            break;
        }
        case ImageFormat::kUnknown:
            return bad_file(what, "not a JPEG, PNG or PGM image (it starts with " + first_bytes_hex(bytes, 4) + ")");
    }
    if (d.format != ImageFormat::kJpeg) {
        d.width = w;
        d.height = h;
        d.resized = w != target.width || h != target.height;
    }
    resize_to_chw({hwc_.data(), w, h, target.channels}, target.width, target.height, target.resize, out, scratch_);
    return d;
}

}  // namespace psrun::worker
