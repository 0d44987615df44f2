#include "workerd/data/pgm_reader.h"

#include <cstddef>

#include "workerd/data/reader_common.h"

namespace psrun::worker {
namespace {

bool is_space(std::uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(std::uint8_t c) { return c >= '0' && c <= '9'; }

// Walks the header and the ASCII raster: whitespace and comments between decimal fields.
class PgmCursor {
  public:
    explicit PgmCursor(const std::vector<std::uint8_t>& bytes) : bytes_(bytes) {}

    void skip_space_and_comments() {
        while (pos_ < bytes_.size()) {
            if (is_space(bytes_[pos_])) {
                ++pos_;
            } else if (bytes_[pos_] == '#') {
                while (pos_ < bytes_.size() && bytes_[pos_] != '\n' && bytes_[pos_] != '\r') ++pos_;
            } else {
                break;
            }
        }
    }
    // A decimal field after optional whitespace/comments; false when none or above `limit`.
    bool number(std::uint64_t limit, std::uint64_t& out) {
        skip_space_and_comments();
        if (pos_ >= bytes_.size() || !is_digit(bytes_[pos_])) return false;
        out = 0;
        while (pos_ < bytes_.size() && is_digit(bytes_[pos_])) {
            out = out * 10 + (bytes_[pos_++] - '0');
            if (out > limit) return false;
        }
        return true;
    }
    std::size_t pos() const { return pos_; }
    void advance(std::size_t n) { pos_ += n; }
    bool at_end() const { return pos_ >= bytes_.size(); }
    std::uint8_t peek() const { return bytes_[pos_]; }

  private:
    const std::vector<std::uint8_t>& bytes_;
    std::size_t pos_ = 0;
};

std::uint8_t rescale(std::uint64_t v, std::uint64_t maxval) {
    return static_cast<std::uint8_t>((v * 255 + maxval / 2) / maxval);
}

}  // namespace

bool looks_like_pgm(const std::vector<std::uint8_t>& bytes) {
    return bytes.size() >= 3 && bytes[0] == 'P' && (bytes[1] == '5' || bytes[1] == '2') && is_space(bytes[2]);
}

Result<ImageArray> parse_pgm(const std::vector<std::uint8_t>& bytes, const std::string& path) {
    if (!looks_like_pgm(bytes))
        return bad_file(path, "not a PGM image (it does not start with \"P5\" or \"P2\" and whitespace)");
    const bool binary = bytes[1] == '5';
    PgmCursor cur(bytes);
    cur.advance(2);
    std::uint64_t width = 0, height = 0, maxval = 0;
    if (!cur.number(kMaxImageSide, width) || width == 0)
        return bad_file(path, "bad PGM width (expected 1.." + std::to_string(kMaxImageSide) + ")");
    if (!cur.number(kMaxImageSide, height) || height == 0)
        return bad_file(path, "bad PGM height (expected 1.." + std::to_string(kMaxImageSide) + ")");
    if (!cur.number(65535, maxval) || maxval == 0) return bad_file(path, "bad PGM maxval (expected 1..255)");
    if (maxval > 255)
        return bad_file(path, "PGM maxval " + std::to_string(maxval) +
                                  " means 16-bit pixels; only 8-bit PGM (maxval <= 255) is read");
    ImageArray image;
    image.count = 1;
    image.channels = 1;
    image.height = static_cast<int>(height);
    image.width = static_cast<int>(width);
    image.type = PixelType::kUint8;
    const std::size_t pixels = static_cast<std::size_t>(width * height);
    image.u8.resize(pixels);
    if (binary) {
        // Exactly one whitespace byte separates maxval from the raster.
        if (cur.at_end() || !is_space(cur.peek())) return bad_file(path, "no whitespace after the PGM maxval");
        cur.advance(1);
        if (bytes.size() - cur.pos() < pixels)
            return bad_file(path, "truncated: a " + std::to_string(width) + "x" + std::to_string(height) +
                                      " PGM holds " + std::to_string(pixels) + " pixel bytes, the file " +
                                      std::to_string(bytes.size() - cur.pos()));
        for (std::size_t i = 0; i < pixels; ++i) {
            const std::uint8_t v = bytes[cur.pos() + i];
            if (v > maxval) return bad_file(path, "pixel " + std::to_string(i) + " exceeds maxval");
            image.u8[i] = rescale(v, maxval);
        }
        cur.advance(pixels);
    } else {
        for (std::size_t i = 0; i < pixels; ++i) {
            std::uint64_t v = 0;
            if (!cur.number(maxval, v))
                return bad_file(path, "ASCII PGM pixel " + std::to_string(i) + " of " + std::to_string(pixels) +
                                          " is missing, not a number or above maxval " + std::to_string(maxval));
            image.u8[i] = rescale(v, maxval);
        }
    }
    while (!cur.at_end() && is_space(cur.peek())) cur.advance(1);
    if (!cur.at_end())
        return bad_file(
            path, std::to_string(bytes.size() - cur.pos()) + " bytes after the image (one image per PGM file is read)");
    return image;
}

}  // namespace psrun::worker
