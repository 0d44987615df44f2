#include "workerd/idx_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace psrun::worker {
namespace {

// Upper bound on an inflated file: MNIST's largest file is 47 MB.
constexpr std::size_t kMaxInflatedBytes = std::size_t{1} << 30;

std::uint32_t read_be32(const std::uint8_t* p) {
    return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
           std::uint32_t{p[3]};
}

tl::unexpected<Error> bad_file(const std::string& path, const std::string& problem) {
    return make_error(ErrorCode::kInvalidArgument, path + ": " + problem);
}

Result<std::vector<std::uint8_t>> inflate_gzip(const std::vector<std::uint8_t>& in,
                                               const std::string& path) {
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 16) != Z_OK) return bad_file(path, "cannot initialise zlib");
    std::vector<std::uint8_t> out(in.size() * 4 + 4096);
    zs.next_in = const_cast<Bytef*>(in.data());
    zs.avail_in = static_cast<uInt>(in.size());
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        if (zs.total_out == out.size()) {
            if (out.size() >= kMaxInflatedBytes) {
                inflateEnd(&zs);
                return bad_file(path, "inflated size exceeds 1 GiB");
            }
            out.resize(out.size() * 2);
        }
        zs.next_out = out.data() + zs.total_out;
        zs.avail_out = static_cast<uInt>(out.size() - zs.total_out);
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

}  // namespace

Result<std::vector<std::uint8_t>> read_maybe_gzip(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return make_error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                          path + ": cannot open (" + std::strerror(errno) + ")");
    }
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
    if (in.bad()) return make_error(ErrorCode::kIo, path + ": read error");
    return maybe_inflate(std::move(bytes), path);
}

Result<std::vector<std::uint8_t>> maybe_inflate(std::vector<std::uint8_t> bytes,
                                                const std::string& path) {
    if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) return inflate_gzip(bytes, path);
    return bytes;
}

Result<IdxImages> parse_idx_images(const std::vector<std::uint8_t>& bytes,
                                   const std::string& path) {
    if (bytes.size() < 16) return bad_file(path, "too short for an idx3 header (16 bytes)");
    const std::uint32_t magic = read_be32(bytes.data());
    if (magic != kIdxImagesMagic) {
        return bad_file(path, "bad magic number " + std::to_string(magic) +
                                  " (expected 2051: idx3 unsigned-byte images)");
    }
    const std::uint32_t count = read_be32(bytes.data() + 4);
    const std::uint32_t rows = read_be32(bytes.data() + 8);
    const std::uint32_t cols = read_be32(bytes.data() + 12);
    if (count == 0 || rows == 0 || cols == 0 || rows > 4096 || cols > 4096) {
        return bad_file(path, "bad dimensions " + std::to_string(count) + "x" +
                                  std::to_string(rows) + "x" + std::to_string(cols));
    }
    const std::size_t expected = 16 + std::size_t{count} * rows * cols;
    if (bytes.size() != expected) {
        return bad_file(path, "length " + std::to_string(bytes.size()) + " bytes does not match " +
                                  "its header (expected " + std::to_string(expected) + ")");
    }
    IdxImages out;
    out.count = count;
    out.rows = static_cast<int>(rows);
    out.cols = static_cast<int>(cols);
    out.pixels.assign(bytes.begin() + 16, bytes.end());
    return out;
}

Result<IdxLabels> parse_idx_labels(const std::vector<std::uint8_t>& bytes,
                                   const std::string& path) {
    if (bytes.size() < 8) return bad_file(path, "too short for an idx1 header (8 bytes)");
    const std::uint32_t magic = read_be32(bytes.data());
    if (magic != kIdxLabelsMagic) {
        return bad_file(path, "bad magic number " + std::to_string(magic) +
                                  " (expected 2049: idx1 unsigned-byte labels)");
    }
    const std::uint32_t count = read_be32(bytes.data() + 4);
    if (count == 0) return bad_file(path, "holds no labels");
    const std::size_t expected = 8 + std::size_t{count};
    if (bytes.size() != expected) {
        return bad_file(path, "length " + std::to_string(bytes.size()) + " bytes does not match " +
                                  "its header (expected " + std::to_string(expected) + ")");
    }
    IdxLabels out;
    out.labels.assign(bytes.begin() + 8, bytes.end());
    for (std::size_t i = 0; i < out.labels.size(); ++i) {
        if (out.labels[i] >= kNumClasses) {
            return bad_file(path, "label " + std::to_string(out.labels[i]) + " at index " +
                                      std::to_string(i) + " is out of range 0-9");
        }
    }
    return out;
}

Result<IdxImages> read_idx_images(const std::string& path) {
    auto bytes = read_maybe_gzip(path);
    if (!bytes) return tl::unexpected(bytes.error());
    return parse_idx_images(*bytes, path);
}

Result<IdxLabels> read_idx_labels(const std::string& path) {
    auto bytes = read_maybe_gzip(path);
    if (!bytes) return tl::unexpected(bytes.error());
    return parse_idx_labels(*bytes, path);
}

Result<LabeledImages> load_split(const std::string& dir, const std::string& prefix) {
    auto pick = [&](const std::string& name) {
        const std::string raw = dir + "/" + name;
        if (std::filesystem::exists(raw)) return raw;
        if (std::filesystem::exists(raw + ".gz")) return raw + ".gz";
        return raw;  // reported as missing by the reader
    };
    const std::string images_path = pick(prefix + "-images-idx3-ubyte");
    const std::string labels_path = pick(prefix + "-labels-idx1-ubyte");
    auto images = read_idx_images(images_path);
    if (!images) return tl::unexpected(images.error());
    auto labels = read_idx_labels(labels_path);
    if (!labels) return tl::unexpected(labels.error());
    if (labels->labels.size() != images->count) {
        return make_error(ErrorCode::kInvalidArgument,
                          labels_path + ": holds " + std::to_string(labels->labels.size()) +
                              " labels but " + images_path + " holds " +
                              std::to_string(images->count) + " images");
    }
    return LabeledImages{std::move(*images), std::move(*labels)};
}

}  // namespace psrun::worker
