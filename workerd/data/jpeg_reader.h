// JPEG decoding with libjpeg-turbo's TurboJPEG API. A JpegDecoder holds one decompressor handle
// (created once: creating it per image costs more than decoding a small one); it is not
// thread-safe, so each decoding thread owns one. Every failure is kInvalidArgument
// "<what>: <problem>".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/image_resize.h"

namespace psrun::worker {

// True when `bytes` start with a JPEG SOI marker (FF D8 FF).
bool looks_like_jpeg(std::span<const std::uint8_t> bytes);

struct JpegInfo {
    int width = 0;  // of the file
    int height = 0;
    int decoded_width = 0;  // after DCT scaling (see decode())
    int decoded_height = 0;
    bool file_color = false;  // not a grayscale JPEG
};

class JpegDecoder {
  public:
    JpegDecoder();
    ~JpegDecoder();
    JpegDecoder(const JpegDecoder&) = delete;
    JpegDecoder& operator=(const JpegDecoder&) = delete;

    // Decodes `bytes` into `hwc` (interleaved, `channels` 1 = gray (the luma) or 3 = RGB), at the
    // smallest of libjpeg-turbo's DCT scaling factors (1/8 ... 1) whose size is still at least
    // min_source_size() for fitting it to target_width x target_height by `mode` (0 x 0: full
    // size), which makes large photos cheap to bring down to a model's input. Decoded sides above kMaxImageSide are
    // refused. Corrupt data that libjpeg-turbo only warns about (extraneous bytes, a truncated scan) still decodes, as
    // libjpeg's own tools do; fatal errors fail.
    [[nodiscard]] Result<JpegInfo> decode(std::span<const std::uint8_t> bytes, const std::string& what, int channels,
                                          int target_width, int target_height, ResizeMode mode,
                                          std::vector<std::uint8_t>& hwc);

  private:
    void* handle_;
};

}  // namespace psrun::worker
