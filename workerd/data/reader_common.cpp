#include "workerd/data/reader_common.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace psrun::worker {
namespace {

Result<std::vector<std::uint8_t>> inflate_gzip(const std::vector<std::uint8_t>& in, const std::string& path) {
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 16) != Z_OK) return bad_file(path, "cannot initialise zlib");
    std::vector<std::uint8_t> out(std::min(in.size() * 4 + 4096, kMaxInflatedBytes));
    zs.next_in = const_cast<Bytef*>(in.data());
    zs.avail_in = static_cast<uInt>(in.size());
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        if (zs.total_out == out.size()) {
            if (out.size() >= kMaxInflatedBytes) {
                inflateEnd(&zs);
                return bad_file(path, "inflated size exceeds 4 GiB");
            }
            out.resize(std::min(out.size() * 2, kMaxInflatedBytes));
        }
        zs.next_out = out.data() + zs.total_out;
        zs.avail_out = static_cast<uInt>(std::min<std::size_t>(out.size() - zs.total_out, 1u << 30));
        rc = inflate(&zs, Z_NO_FLUSH);
        if (rc == Z_BUF_ERROR && zs.avail_in == 0) {
            inflateEnd(&zs);
            return bad_file(path, "truncated gzip stream");
        }
        if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
            std::string msg = zs.msg != nullptr ? zs.msg : "error " + std::to_string(rc);
            inflateEnd(&zs);
            return bad_file(path, "corrupt gzip data (" + msg + ")");
        }
    }
    out.resize(zs.total_out);
    inflateEnd(&zs);
    return out;
}

Result<void> check_payload(std::size_t expected, std::size_t payload_bytes, const std::string& path) {
    if (payload_bytes < expected)
        return bad_file(path, "truncated: its header declares " + std::to_string(expected) +
                                  " data bytes but the file holds " + std::to_string(payload_bytes));
    if (payload_bytes > expected)
        return bad_file(path, std::to_string(payload_bytes - expected) +
                                  " trailing bytes after the data its header declares (" + std::to_string(expected) +
                                  " bytes)");
    return {};
}

}  // namespace

std::string first_bytes_hex(std::span<const std::uint8_t> bytes, std::size_t n) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < std::min(bytes.size(), n); ++i) {
        out += "\\x";
        out += hex[bytes[i] >> 4];
        out += hex[bytes[i] & 15];
    }
    return out;
}

tl::unexpected<Error> bad_file(const std::string& path, const std::string& problem) {
    return make_error(ErrorCode::kInvalidArgument, path + ": " + problem);
}

Result<std::vector<std::uint8_t>> read_maybe_gzip(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return bad_file(path, "is a directory, not a data file");
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return make_error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                          path + ": cannot open (" + std::strerror(errno) + ")");
    }
    // One read of the whole file (CIFAR and float32 .npy files run to hundreds of MB).
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    in.seekg(0, std::ios::beg);
    if (size < 0 || !in) return make_error(ErrorCode::kIo, path + ": cannot determine its size");
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
    in.read(reinterpret_cast<char*>(bytes.data()), size);
    if (in.gcount() != size || in.bad()) return make_error(ErrorCode::kIo, path + ": read error");
    return maybe_inflate(std::move(bytes), path);
}

Result<std::vector<std::uint8_t>> maybe_inflate(std::vector<std::uint8_t> bytes, const std::string& path) {
    if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) return inflate_gzip(bytes, path);
    return bytes;
}

Result<void> check_image_payload(std::uint64_t count, std::uint64_t channels, std::uint64_t height, std::uint64_t width,
                                 std::size_t element_bytes, std::size_t payload_bytes, const std::string& path) {
    const std::string dims = std::to_string(count) + "x" + std::to_string(channels) + "x" + std::to_string(height) +
                             "x" + std::to_string(width);
    if (count == 0 || channels == 0 || height == 0 || width == 0)
        return bad_file(path, "bad dimensions " + dims + " (N x C x H x W): a dimension is 0");
    if (count > kMaxExamples || channels > kMaxImageSide || height > kMaxImageSide || width > kMaxImageSide)
        return bad_file(path, "bad dimensions " + dims + " (N x C x H x W): at most " + std::to_string(kMaxExamples) +
                                  " examples and " + std::to_string(kMaxImageSide) + " per channel, row or column");
    std::size_t bytes = element_bytes;
    if (!multiply_checked(bytes, count) || !multiply_checked(bytes, channels) || !multiply_checked(bytes, height) ||
        !multiply_checked(bytes, width))
        return bad_file(path, "bad dimensions " + dims + ": the size overflows");
    return check_payload(bytes, payload_bytes, path);
}

Result<void> check_label_payload(std::uint64_t count, std::size_t element_bytes, std::size_t payload_bytes,
                                 const std::string& path) {
    if (count == 0) return bad_file(path, "holds no labels");
    if (count > kMaxExamples) return bad_file(path, "bad dimensions: " + std::to_string(count) + " labels");
    std::size_t bytes = element_bytes;
    if (!multiply_checked(bytes, count)) return bad_file(path, "bad dimensions: the size overflows");
    return check_payload(bytes, payload_bytes, path);
}

}  // namespace psrun::worker
