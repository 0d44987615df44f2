#include "workerd/data/npy_reader.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>

#include "workerd/data/reader_common.h"

namespace psrun::worker {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kMaxHeaderBytes = 1 << 16;  // numpy writes ~128; headers are text

// Reads the header dict, a Python literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
class HeaderCursor {
  public:
    explicit HeaderCursor(std::string_view text) : s_(text) {}
    void skip_space() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
            ++pos_;
    }
    bool take(char c) {
        skip_space();
        if (pos_ < s_.size() && s_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }
    bool peek(char c) {
        skip_space();
        return pos_ < s_.size() && s_[pos_] == c;
    }
    bool string(std::string& out) {
        skip_space();
        if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return false;
        const char quote = s_[pos_++];
        const std::size_t end = s_.find(quote, pos_);
        if (end == std::string_view::npos) return false;
        out.assign(s_.substr(pos_, end - pos_));
        pos_ = end + 1;
        return true;
    }
    bool word(std::string_view w) {
        skip_space();
        if (s_.substr(pos_, w.size()) != w) return false;
        pos_ += w.size();
        return true;
    }
    bool integer(std::uint64_t& out) {
        skip_space();
        const auto [ptr, ec] = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), out);
        if (ec != std::errc()) return false;
        pos_ = static_cast<std::size_t>(ptr - s_.data());
        take('L');  // Python 2 longs
        return true;
    }
    bool at_end() {
        skip_space();
        return pos_ == s_.size();
    }

  private:
    std::string_view s_;
    std::size_t pos_ = 0;
};

Result<NpyHeader> parse_dict(std::string_view text, NpyHeader h, const std::string& path) {
    const auto bad = [&](const std::string& why) {
        return bad_file(path, ".npy header " + why + " (header: " + std::string(text.substr(0, 200)) + ")");
    };
    HeaderCursor c(text);
    if (!c.take('{')) return bad("is not a Python dict");
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    while (!c.take('}')) {
        std::string key;
        if (!c.string(key) || !c.take(':')) return bad("is malformed");
        if (key == "descr") {
            if (!c.string(h.descr))
                return bad(
                    "has a 'descr' that is not a simple dtype string (structured arrays are not "
                    "supported)");
            have_descr = true;
        } else if (key == "fortran_order") {
            if (c.word("True")) fortran = true;
            else if (!c.word("False")) return bad("has a 'fortran_order' that is neither True nor False");
            have_order = true;
        } else if (key == "shape") {
            if (!c.take('(')) return bad("has a 'shape' that is not a tuple");
            h.shape.clear();
            while (!c.take(')')) {
                std::uint64_t d = 0;
                if (h.shape.size() >= 32 || !c.integer(d)) return bad("has a malformed 'shape'");
                h.shape.push_back(d);
                if (!c.take(',') && !c.peek(')')) return bad("has a malformed 'shape'");
            }
            have_shape = true;
        } else {
            return bad("has an unknown key '" + key + "'");
        }
        if (!c.take(',') && !c.peek('}')) return bad("is malformed");
    }
    if (!c.at_end()) return bad("has bytes after the dict");
    if (!have_descr || !have_order || !have_shape) return bad("lacks 'descr', 'fortran_order' or 'shape'");
    if (fortran)
        return bad_file(path,
                        "fortran_order is True (a column-major array): not supported; save a C-ordered "
                        "array instead: np.save(f, np.ascontiguousarray(x))");
    // descr: byte order ('<' little, '>' big, '|' not applicable, '=' native: little on the
    // x86-64 hosts psrun runs on), kind, item size.
    std::string_view d = h.descr;
    if (!d.empty() && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
        h.big_endian = d[0] == '>';
        d.remove_prefix(1);
    }
    std::uint64_t size = 0;
    if (d.size() < 2 || std::from_chars(d.data() + 1, d.data() + d.size(), size).ptr != d.data() + d.size() ||
        size == 0 || size > 16)
        return bad_file(path, "unsupported dtype '" + h.descr + "'");
    h.kind = d[0];
    h.item_bytes = static_cast<std::size_t>(size);
    return h;
}

std::uint64_t load_unsigned(const std::uint8_t* p, std::size_t n, bool big_endian) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t{p[big_endian ? i : n - 1 - i]} << (8 * (n - 1 - i));
    return v;
}

// Copies count examples into dst (N x C x H x W), reading N x H x W x C when `nhwc`.
template <class T, class Load>
void gather(const std::uint8_t* src, std::size_t item, const ImageArray& a, bool nhwc, std::vector<T>& dst, Load load) {
    const std::size_t c_n = static_cast<std::size_t>(a.channels), w_n = static_cast<std::size_t>(a.width);
    const std::size_t hw = static_cast<std::size_t>(a.height) * w_n, ex = a.example_size();
    dst.resize(a.count * ex);
    if (!nhwc) {
        for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = load(src + i * item);
        return;
    }
    for (std::size_t n = 0; n < a.count; ++n)
        for (std::size_t p = 0; p < hw; ++p)
            for (std::size_t c = 0; c < c_n; ++c) dst[n * ex + c * hw + p] = load(src + (n * ex + p * c_n + c) * item);
}

}  // namespace

Result<ImageLayout> parse_image_layout(std::string_view text) {
    if (text == "auto") return ImageLayout::kAuto;
    if (text == "nchw") return ImageLayout::kNchw;
    if (text == "nhwc") return ImageLayout::kNhwc;
    return make_error(ErrorCode::kInvalidArgument,
                      "--image-layout '" + std::string(text) + "': expected auto, nchw or nhwc");
}

bool looks_like_npy(const std::vector<std::uint8_t>& bytes) {
    return bytes.size() >= kMagic.size() && std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) == 0;
}

Result<NpyHeader> parse_npy_header(const std::vector<std::uint8_t>& bytes, const std::string& path) {
    if (!looks_like_npy(bytes)) return bad_file(path, "bad magic: not a .npy file (expected \\x93NUMPY)");
    if (bytes.size() < 10) return bad_file(path, "too short for a .npy header");
    const std::uint8_t major = bytes[6];
    std::size_t header_len = 0, start = 0;
    if (major == 1) {
        header_len = load_unsigned(bytes.data() + 8, 2, false);
        start = 10;
    } else if (major == 2 || major == 3) {
        if (bytes.size() < 12) return bad_file(path, "too short for a .npy header");
        header_len = load_unsigned(bytes.data() + 8, 4, false);
        start = 12;
    } else {
        return bad_file(path, ".npy format version " + std::to_string(major) + " is not supported (1, 2 or 3)");
    }
    if (header_len > kMaxHeaderBytes || start + header_len > bytes.size())
        return bad_file(path, "truncated .npy header (declares " + std::to_string(header_len) + " bytes)");
    NpyHeader h;
    h.data_offset = start + header_len;
    const std::string_view text(reinterpret_cast<const char*>(bytes.data() + start), header_len);
    return parse_dict(text, std::move(h), path);
}

ImageLayout resolve_image_layout(const std::vector<std::uint64_t>& shape, ImageLayout layout, const ImageDims* expect) {
    if (layout != ImageLayout::kAuto || expect == nullptr || shape.size() != 4) return layout;
    const auto c = static_cast<std::uint64_t>(expect->channels), h = static_cast<std::uint64_t>(expect->height),
               w = static_cast<std::uint64_t>(expect->width);
    const bool nchw = shape[1] == c && shape[2] == h && shape[3] == w;
    const bool nhwc = shape[1] == h && shape[2] == w && shape[3] == c;
    if (nchw == nhwc) return ImageLayout::kAuto;
    return nchw ? ImageLayout::kNchw : ImageLayout::kNhwc;
}

Result<ImageArray> parse_npy_images(const std::vector<std::uint8_t>& bytes, const std::string& path, ImageLayout layout,
                                    const ImageDims* expect) {
    PSRUN_TRY_ASSIGN(auto h, parse_npy_header(bytes, path));
    layout = resolve_image_layout(h.shape, layout, expect);
    const bool u8 = h.kind == 'u' && h.item_bytes == 1, f32 = h.kind == 'f' && h.item_bytes == 4;
    if (!u8 && !f32)
        return bad_file(path,
                        "dtype '" + h.descr + "' is not supported for images (uint8 or float32: x.astype(np.float32))");
    const auto& s = h.shape;
    if (s.size() != 3 && s.size() != 4)
        return bad_file(path, "images must have shape (N, H, W), (N, C, H, W) or (N, H, W, C), not rank " +
                                  std::to_string(s.size()));
    bool nhwc = false;
    if (s.size() == 4) {
        if (layout == ImageLayout::kAuto) {
            const bool c1 = s[1] <= 4, c3 = s[3] <= 4;
            if (c1 == c3)
                return bad_file(path, "cannot tell whether shape (" + std::to_string(s[0]) + ", " +
                                          std::to_string(s[1]) + ", " + std::to_string(s[2]) + ", " +
                                          std::to_string(s[3]) +
                                          ") is N x C x H x W or N x H x W x C: give --image-layout nchw or nhwc");
            nhwc = c3;
        } else {
            nhwc = layout == ImageLayout::kNhwc;
        }
    }
    const std::uint64_t c = s.size() == 3 ? 1 : (nhwc ? s[3] : s[1]);
    const std::uint64_t height = s.size() == 3 ? s[1] : (nhwc ? s[1] : s[2]);
    const std::uint64_t width = s.size() == 3 ? s[2] : (nhwc ? s[2] : s[3]);
    PSRUN_TRY(check_image_payload(s[0], c, height, width, h.item_bytes, bytes.size() - h.data_offset, path));
    ImageArray out;
    out.count = s[0];
    out.channels = static_cast<int>(c);
    out.height = static_cast<int>(height);
    out.width = static_cast<int>(width);
    const std::uint8_t* data = bytes.data() + h.data_offset;
    if (u8) {
        out.type = PixelType::kUint8;
        if (nhwc) gather(data, 1, out, nhwc, out.u8, [](const std::uint8_t* p) { return *p; });
        else out.u8.assign(data, bytes.data() + bytes.size());  // already N x C x H x W
        return out;
    }
    out.type = PixelType::kFloat32;
    const bool big = h.big_endian;
    gather(data, 4, out, nhwc, out.f32, [big](const std::uint8_t* p) {
        return std::bit_cast<float>(static_cast<std::uint32_t>(load_unsigned(p, 4, big)));
    });
    for (std::size_t i = 0; i < out.f32.size(); ++i)
        if (!std::isfinite(out.f32[i]))
            return bad_file(path, "value at index " + std::to_string(i) + " is not finite (NaN or infinity)");
    return out;
}

Result<std::vector<std::int32_t>> parse_npy_labels(const std::vector<std::uint8_t>& bytes, const std::string& path) {
    PSRUN_TRY_ASSIGN(auto h, parse_npy_header(bytes, path));
    const std::size_t n = h.item_bytes;
    if (!((h.kind == 'u' && n == 1) || (h.kind == 'i' && (n == 4 || n == 8))))
        return bad_file(
            path, "dtype '" + h.descr + "' is not supported for labels (uint8, int32 or int64: y.astype(np.int64))");
    const auto& s = h.shape;
    if (s.empty() || s.size() > 2 || (s.size() == 2 && s[1] != 1))
        return bad_file(path, "labels must have shape (N,) or (N, 1)");
    PSRUN_TRY(check_label_payload(s[0], n, bytes.size() - h.data_offset, path));
    std::vector<std::int32_t> out(s[0]);
    const std::uint8_t* data = bytes.data() + h.data_offset;
    for (std::size_t i = 0; i < out.size(); ++i) {
        const std::uint64_t raw = load_unsigned(data + i * n, n, h.big_endian);
        std::int64_t v = static_cast<std::int64_t>(raw);
        if (h.kind == 'i' && n == 4) v = static_cast<std::int32_t>(static_cast<std::uint32_t>(raw));
        if (v < INT32_MIN || v > INT32_MAX)
            return bad_file(path,
                            "label " + std::to_string(v) + " at index " + std::to_string(i) + " does not fit int32");
        out[i] = static_cast<std::int32_t>(v);
    }
    return out;
}

}  // namespace psrun::worker
