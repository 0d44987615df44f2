#include "workerd/data/split_files.h"

#include "workerd/data/cifar_reader.h"
#include "workerd/data/idx_reader.h"
#include "workerd/data/reader_common.h"

namespace psrun::worker {
namespace {

tl::unexpected<Error> unknown_format(const std::vector<std::uint8_t>& bytes,
                                     const std::string& path) {
    return bad_file(
        path,
        "bad magic: neither a NumPy .npy file (\\x93NUMPY) nor an IDX file (\\x00\\x00 type rank); "
        "it starts with " +
            first_bytes_hex(bytes) + " (for CIFAR batches write cifar10:FILE or cifar100:FILE)");
}

// Every load error is the user's option value: kInvalidArgument (exit 2), even a missing file.
Error as_invalid(Error e) {
    if (e.code == ErrorCode::kNotFound) e.code = ErrorCode::kInvalidArgument;
    return e;
}

std::vector<std::string> split_commas(const std::string& text) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = text.find(',', start);
        out.push_back(
            text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) return out;
        start = comma + 1;
    }
}

}  // namespace

Result<ImageArray> read_images_file(const std::string& path, ImageLayout layout) {
    auto bytes = read_maybe_gzip(path);
    if (!bytes) return tl::unexpected(bytes.error());
    if (looks_like_npy(*bytes)) return parse_npy_images(*bytes, path, layout);
    if (looks_like_idx(*bytes)) return parse_idx_images(*bytes, path);
    return unknown_format(*bytes, path);
}

Result<std::vector<std::int32_t>> read_labels_file(const std::string& path) {
    auto bytes = read_maybe_gzip(path);
    if (!bytes) return tl::unexpected(bytes.error());
    if (looks_like_npy(*bytes)) return parse_npy_labels(*bytes, path);
    if (looks_like_idx(*bytes)) return parse_idx_labels(*bytes, path);
    return unknown_format(*bytes, path);
}

SplitNames split_names(const std::string& split, const SplitFiles& files) {
    const bool cifar = files.labels.empty();
    return {split + " images " + files.images,
            split + (cifar ? " images " : " labels ") + (cifar ? files.images : files.labels)};
}

Result<LabeledImages> load_split_files(const std::string& split, const SplitFiles& files,
                                       ImageLayout layout) {
    const std::size_t colon = files.images.find(':');
    auto format = colon == std::string::npos
                      ? Result<CifarFormat>(make_error(ErrorCode::kNotFound, ""))
                      : parse_cifar_format(files.images.substr(0, colon));
    if (format) {  // otherwise a path (which may hold a colon)
        if (!files.labels.empty())
            return make_error(ErrorCode::kInvalidArgument,
                              "--" + split +
                                  "-labels: CIFAR batches hold their labels; "
                                  "give only --" +
                                  split + "-images " + files.images);
        auto data = read_cifar(split_commas(files.images.substr(colon + 1)), *format);
        if (!data) return tl::unexpected(as_invalid(data.error()));
        return data;
    }
    if (files.labels.empty())
        return make_error(ErrorCode::kInvalidArgument, "--" + split + "-images " + files.images +
                                                           " needs --" + split + "-labels");
    auto images = read_images_file(files.images, layout);
    if (!images) return tl::unexpected(as_invalid(images.error()));
    auto labels = read_labels_file(files.labels);
    if (!labels) return tl::unexpected(as_invalid(labels.error()));
    const SplitNames names = split_names(split, files);
    if (labels->size() != images->count)
        return make_error(ErrorCode::kInvalidArgument,
                          names.labels + ": holds " + std::to_string(labels->size()) +
                              " labels but " + names.images + " holds " +
                              std::to_string(images->count) + " images");
    LabeledImages out;
    out.images = std::move(*images);
    out.labels = std::move(*labels);
    return out;
}

}  // namespace psrun::worker
