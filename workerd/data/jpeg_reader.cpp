#include "workerd/data/jpeg_reader.h"

#include <turbojpeg.h>

#include <new>

#include "workerd/data/reader_common.h"

namespace psrun::worker {
namespace {

int scaled(int size, const tjscalingfactor& f) { return TJSCALED(size, f); }

}  // namespace

bool looks_like_jpeg(std::span<const std::uint8_t> bytes) {
    return bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

JpegDecoder::JpegDecoder() : handle_(tjInitDecompress()) {
    if (handle_ == nullptr) throw std::bad_alloc();
}

JpegDecoder::~JpegDecoder() { tjDestroy(static_cast<tjhandle>(handle_)); }

Result<JpegInfo> JpegDecoder::decode(std::span<const std::uint8_t> bytes, const std::string& what, int channels,
                                     int target_width, int target_height, ResizeMode mode,
                                     std::vector<std::uint8_t>& hwc) {
    auto* h = static_cast<tjhandle>(handle_);
    if (channels != 1 && channels != 3)
        return bad_file(what, "a JPEG can feed a model of 1 or 3 input channels, not " + std::to_string(channels));
    if (!looks_like_jpeg(bytes)) return bad_file(what, "not a JPEG image (no SOI marker)");
    if (bytes.size() > 0x7fffffffUL) return bad_file(what, "JPEG larger than 2 GiB");
    int width = 0, height = 0, subsamp = 0, colorspace = 0;
    if (tjDecompressHeader3(h, bytes.data(), static_cast<unsigned long>(bytes.size()), &width, &height, &subsamp,
                            &colorspace) != 0)
        return bad_file(what, std::string("unreadable JPEG: ") + tjGetErrorStr2(h));
    if (width <= 0 || height <= 0) return bad_file(what, "unreadable JPEG: its header declares 0 pixels");
    JpegInfo info;
    info.width = width;
    info.height = height;
    info.file_color = colorspace != TJCS_GRAY;
    int min_width = 0, min_height = 0;
    if (target_width > 0 && target_height > 0)
        min_source_size(width, height, target_width, target_height, mode, min_width, min_height);
    int count = 0;  // the factors libjpeg-turbo offers, from 2/1 down to 1/8
    const tjscalingfactor* factors = tjGetScalingFactors(&count);
    // The smallest reduction that is still >= the minimum size.
    tjscalingfactor best{1, 1};
    for (int i = 0; i < count && (min_width > 0 || min_height > 0); ++i) {
        const tjscalingfactor f = factors[i];
        if (f.num > f.denom) continue;  // only reductions
        const int w = scaled(width, f), hh = scaled(height, f);
        if (w >= min_width && hh >= min_height && w < scaled(width, best)) best = f;
    }
    info.decoded_width = scaled(width, best);
    info.decoded_height = scaled(height, best);
    if (info.decoded_width > static_cast<int>(kMaxImageSide) || info.decoded_height > static_cast<int>(kMaxImageSide))
        return bad_file(what, "JPEG of " + std::to_string(width) + "x" + std::to_string(height) +
                                  " pixels: too large (at most " + std::to_string(kMaxImageSide) +
                                  " per side after libjpeg-turbo's 1/8 scaling)");
    hwc.resize(static_cast<std::size_t>(info.decoded_width) * static_cast<std::size_t>(info.decoded_height) *
               static_cast<std::size_t>(channels));
    const int format = channels == 3 ? TJPF_RGB : TJPF_GRAY;
    if (tjDecompress2(h, bytes.data(), static_cast<unsigned long>(bytes.size()), hwc.data(), info.decoded_width, 0,
                      info.decoded_height, format, 0) != 0 &&
        tjGetErrorCode(h) != TJERR_WARNING)
        return bad_file(what, std::string("unreadable JPEG: ") + tjGetErrorStr2(h));
    return info;
}

}  // namespace psrun::worker
