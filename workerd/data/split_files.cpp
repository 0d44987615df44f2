#include "workerd/data/split_files.h"

#include "workerd/data/cifar_reader.h"
#include "workerd/data/idx_reader.h"
#include "workerd/data/npy_values.h"
#include "workerd/data/reader_common.h"

namespace psrun::worker {
namespace {

tl::unexpected<Error> unknown_format(const std::vector<std::uint8_t>& bytes, const std::string& path) {
    return bad_file(path,
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
        out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) return out;
        start = comma + 1;
    }
}

}  // namespace

Result<ImageArray> read_images_file(const std::string& path, ImageLayout layout, const ImageDims* expect) {
    PSRUN_TRY_ASSIGN(auto bytes, read_maybe_gzip(path));
    if (looks_like_npy(bytes)) return parse_npy_images(bytes, path, layout, expect);
    if (looks_like_idx(bytes)) return parse_idx_images(bytes, path);
    return unknown_format(bytes, path);
}

Result<std::vector<std::int32_t>> read_labels_file(const std::string& path) {
    PSRUN_TRY_ASSIGN(auto bytes, read_maybe_gzip(path));
    if (looks_like_npy(bytes)) return parse_npy_labels(bytes, path);
    if (looks_like_idx(bytes)) return parse_idx_labels(bytes, path);
    return unknown_format(bytes, path);
}

SplitNames split_names(const std::string& split, const SplitFiles& files) {
    const bool cifar = files.labels.empty();
    return {split + " images " + files.images,
            split + (cifar ? " images " : " labels ") + (cifar ? files.images : files.labels)};
}

namespace {

// A .npy file of rows for a features, tokens or vector-target model.
Result<std::vector<std::uint8_t>> read_npy(const std::string& path, NpyHeader& header) {
    auto bytes = read_maybe_gzip(path);
    if (!bytes) return tl::unexpected(as_invalid(bytes.error()));
    if (!looks_like_npy(*bytes))
        return bad_file(path,
                        "not a NumPy .npy file (feature vectors, token ids and target vectors are read from "
                        ".npy arrays of one row per example)");
    PSRUN_TRY_ASSIGN(auto h, parse_npy_header(*bytes, path));
    header = h;
    return bytes;
}

Result<void> load_targets(const std::string& path, const ModelInput& model, LabeledImages& out) {
    if (model.target == TargetKind::kClass) {
        auto labels = read_labels_file(path);
        if (!labels) return tl::unexpected(as_invalid(labels.error()));
        out.labels = std::move(*labels);
        return {};
    }
    NpyHeader h;
    PSRUN_TRY_ASSIGN(auto bytes, read_npy(path, h));
    PSRUN_TRY_ASSIGN(auto rows, npy_rows(bytes, h, path));
    PSRUN_TRY_ASSIGN(auto values, npy_as_floats(bytes, h, path));
    out.target = TargetKind::kVector;
    out.targets = std::move(values);
    out.target_length = rows.cols;
    return {};
}

}  // namespace

Result<void> load_example_inputs(const std::string& path, const ModelInput& model, ImageLayout layout,
                                 LabeledImages& out) {
    if (model.input == InputKind::kImage) {
        const ImageDims dims{model.channels, model.height, model.width};
        auto images = read_images_file(path, layout, &dims);
        if (!images) return tl::unexpected(as_invalid(images.error()));
        out.images = std::move(*images);
        return {};
    }
    NpyHeader h;
    PSRUN_TRY_ASSIGN(auto bytes, read_npy(path, h));
    PSRUN_TRY_ASSIGN(auto rows, npy_rows(bytes, h, path));
    if (model.input == InputKind::kTokens) {
        out.input = InputKind::kTokens;
        out.token_length = rows.cols;
        if (model.raw_ids) {
            PSRUN_TRY_ASSIGN(out.raw_tokens, npy_as_raw_ids(bytes, h, path));
        } else {
            PSRUN_TRY_ASSIGN(out.tokens, npy_as_int32(bytes, h, path));
        }
        return {};
    }
    PSRUN_TRY_ASSIGN(auto values, npy_as_floats(bytes, h, path));
    out.input = InputKind::kFeatures;
    out.images = ImageArray{rows.rows, 1, 1, static_cast<int>(rows.cols), PixelType::kFloat32, {}, std::move(values)};
    return {};
}

Result<LabeledImages> load_split_files(const std::string& split, const SplitFiles& files, ImageLayout layout,
                                       const ModelInput* model) {
    if (model != nullptr && (model->input != InputKind::kImage || model->target != TargetKind::kClass) &&
        files.images.find(':') == std::string::npos) {
        if (files.labels.empty())
            return make_error(ErrorCode::kInvalidArgument,
                              "--" + split + "-images " + files.images + " needs --" + split + "-labels");
        LabeledImages out;
        PSRUN_TRY(load_example_inputs(files.images, *model, layout, out));
        PSRUN_TRY(load_targets(files.labels, *model, out));
        return out;  // the counts are compared by check_fits_model
    }
    const std::size_t colon = files.images.find(':');
    auto format = colon == std::string::npos ? Result<CifarFormat>(make_error(ErrorCode::kNotFound, ""))
                                             : parse_cifar_format(files.images.substr(0, colon));
    if (format) {  // otherwise a path (which may hold a colon)
        if (!files.labels.empty())
            return make_error(ErrorCode::kInvalidArgument, "--" + split +
                                                               "-labels: CIFAR batches hold their labels; "
                                                               "give only --" +
                                                               split + "-images " + files.images);
        auto data = read_cifar(split_commas(files.images.substr(colon + 1)), *format);
        if (!data) return tl::unexpected(as_invalid(data.error()));
        return data;
    }
    const bool no_labels = model != nullptr && !model->labels_needed && files.labels.empty();
    if (files.labels.empty() && !no_labels)
        return make_error(ErrorCode::kInvalidArgument,
                          "--" + split + "-images " + files.images + " needs --" + split + "-labels");
    const bool images_model = model != nullptr && model->input == InputKind::kImage;
    const ImageDims dims = images_model ? ImageDims{model->channels, model->height, model->width} : ImageDims{};
    auto images = read_images_file(files.images, layout, images_model ? &dims : nullptr);
    if (!images) return tl::unexpected(as_invalid(images.error()));
    // A model that reads no labels gets class 0 for each example where none are given.
    auto labels = no_labels ? Result<std::vector<std::int32_t>>(std::vector<std::int32_t>(images->count))
                            : read_labels_file(files.labels);
    if (!labels) return tl::unexpected(as_invalid(labels.error()));
    const SplitNames names = split_names(split, files);
    if (labels->size() != images->count)
        return make_error(ErrorCode::kInvalidArgument, names.labels + ": holds " + std::to_string(labels->size()) +
                                                           " labels but " + names.images + " holds " +
                                                           std::to_string(images->count) + " images");
    LabeledImages out;
    out.images = std::move(*images);
    out.labels = std::move(*labels);
    return out;
}

}  // namespace psrun::worker
