#include "workerd/data/idx_reader.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>

namespace psrun::worker {
namespace {

std::uint32_t read_be32(const std::uint8_t* p) {
    return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

std::string magic_text(std::uint32_t magic) {
    return std::to_string(magic) + " (0x" + [&] {
        char hex[9];
        std::snprintf(hex, sizeof hex, "%08x", magic);
        return std::string(hex);
    }() + ")";
}

}  // namespace

bool looks_like_idx(const std::vector<std::uint8_t>& bytes) {
    return bytes.size() >= 4 && bytes[0] == 0 && bytes[1] == 0 &&
           (bytes[2] == kIdxUbyte || bytes[2] == kIdxFloat || (bytes[2] >= 0x09 && bytes[2] <= 0x0E)) &&
           bytes[3] >= 1 && bytes[3] <= 4;
}

Result<ImageArray> parse_idx_images(const std::vector<std::uint8_t>& bytes, const std::string& path) {
    if (bytes.size() < 4) return bad_file(path, "too short for an IDX header");
    const std::uint32_t magic = read_be32(bytes.data());
    const std::uint8_t type = bytes[2];
    const std::size_t rank = bytes[3];
    if (bytes[0] != 0 || bytes[1] != 0 || (type != kIdxUbyte && type != kIdxFloat) || (rank != 3 && rank != 4)) {
        return bad_file(path, "bad magic number " + magic_text(magic) +
                                  " (expected IDX images: 0x00000803/0x00000804 unsigned byte or "
                                  "0x00000d03/0x00000d04 float32, rank 3 N x H x W or rank 4 N x C x H x W)");
    }
    const std::size_t header = 4 + 4 * rank;
    if (bytes.size() < header)
        return bad_file(
            path, "too short for an idx" + std::to_string(rank) + " header (" + std::to_string(header) + " bytes)");
    std::uint64_t dims[4];
    for (std::size_t i = 0; i < rank; ++i) dims[i] = read_be32(bytes.data() + 4 + 4 * i);
    const std::uint64_t channels = rank == 4 ? dims[1] : 1;
    const std::uint64_t height = dims[rank - 2], width = dims[rank - 1];
    const std::size_t element = type == kIdxUbyte ? 1 : 4;
    PSRUN_TRY(check_image_payload(dims[0], channels, height, width, element, bytes.size() - header, path));
    ImageArray out;
    out.count = dims[0];
    out.channels = static_cast<int>(channels);
    out.height = static_cast<int>(height);
    out.width = static_cast<int>(width);
    const std::uint8_t* data = bytes.data() + header;
    if (type == kIdxUbyte) {
        out.type = PixelType::kUint8;
        out.u8.assign(data, bytes.data() + bytes.size());
        return out;
    }
    out.type = PixelType::kFloat32;
    out.f32.resize(out.count * out.example_size());
    for (std::size_t i = 0; i < out.f32.size(); ++i) {
        const std::uint32_t word = read_be32(data + 4 * i);
        const float v = std::bit_cast<float>(word);
        if (!std::isfinite(v))
            return bad_file(path, "value at index " + std::to_string(i) + " is not finite (NaN or infinity)");
        out.f32[i] = v;
    }
    return out;
}

Result<std::vector<std::int32_t>> parse_idx_labels(const std::vector<std::uint8_t>& bytes, const std::string& path) {
    if (bytes.size() < 8) return bad_file(path, "too short for an idx1 header (8 bytes)");
    const std::uint32_t magic = read_be32(bytes.data());
    if (magic != kIdxLabelsMagic)
        return bad_file(
            path, "bad magic number " + magic_text(magic) + " (expected 2049 = 0x00000801: idx1 unsigned-byte labels)");
    const std::uint32_t count = read_be32(bytes.data() + 4);
    PSRUN_TRY(check_label_payload(count, 1, bytes.size() - 8, path));
    return std::vector<std::int32_t>(bytes.begin() + 8, bytes.end());
}

Result<ImageArray> read_idx_images(const std::string& path) {
    PSRUN_TRY_ASSIGN(auto bytes, read_maybe_gzip(path));
    return parse_idx_images(bytes, path);
}

Result<std::vector<std::int32_t>> read_idx_labels(const std::string& path) {
    PSRUN_TRY_ASSIGN(auto bytes, read_maybe_gzip(path));
    return parse_idx_labels(bytes, path);
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
    PSRUN_TRY_ASSIGN(auto images, read_idx_images(images_path));
    PSRUN_TRY_ASSIGN(auto labels, read_idx_labels(labels_path));
    if (labels.size() != images.count) {
        return make_error(ErrorCode::kInvalidArgument, labels_path + ": holds " + std::to_string(labels.size()) +
                                                           " labels but " + images_path + " holds " +
                                                           std::to_string(images.count) + " images");
    }
    for (std::size_t i = 0; i < labels.size(); ++i) {
        if (labels[i] >= 10)
            return bad_file(labels_path, "label " + std::to_string(labels[i]) + " at index " + std::to_string(i) +
                                             " is out of range 0-9");
    }
    LabeledImages out;
    out.images = std::move(images);
    out.labels = std::move(labels);
    return out;
}

}  // namespace psrun::worker
