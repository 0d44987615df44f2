#include "workerd/predict_inputs.h"

#include <cstring>

#include "workerd/data/idx_reader.h"
#include "workerd/data/image_decoder.h"
#include "workerd/data/npy_reader.h"
#include "workerd/data/pgm_reader.h"
#include "workerd/data/png_reader.h"
#include "workerd/data/reader_common.h"
#include "workerd/data/split_files.h"

namespace psrun::worker {
namespace {

std::string shape_text(int c, int h, int w) {
    return std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w);
}

// An (N, C*H*W) .npy array as (N, C, H, W) for `model`: the same bytes under a version 1.0
// header with the model's shape, so that the .npy reader does every other check.
Result<ImageArray> parse_flat_npy(const std::vector<std::uint8_t>& bytes, const NpyHeader& h, const std::string& path,
                                  const ModelInput& model) {
    const std::uint64_t per_image = static_cast<std::uint64_t>(model.channels) *
                                    static_cast<std::uint64_t>(model.height) * static_cast<std::uint64_t>(model.width);
    if (h.shape[1] != per_image)
        return bad_file(path, "images of shape (N, " + std::to_string(h.shape[1]) + ") are flat, but the model " +
                                  model.name + " takes " + shape_text(model.channels, model.height, model.width) +
                                  " = " + std::to_string(per_image) + " values per image");
    std::string dict = "{'descr': '" + h.descr + "', 'fortran_order': False, 'shape': (" + std::to_string(h.shape[0]) +
                       ", " + std::to_string(model.channels) + ", " + std::to_string(model.height) + ", " +
                       std::to_string(model.width) + "), }";
    dict.append(63 - (10 + dict.size()) % 64, ' ');
    dict += '\n';
    // One sized buffer filled by memcpy (GCC 12 warns falsely on growing a 10-byte vector).
    const std::string prefix = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(dict.size() & 0xff) +
                               static_cast<char>(dict.size() >> 8) + dict;
    std::vector<std::uint8_t> rewritten(prefix.size() + bytes.size() - h.data_offset);
    std::memcpy(rewritten.data(), prefix.data(), prefix.size());
    std::memcpy(rewritten.data() + prefix.size(), bytes.data() + h.data_offset, bytes.size() - h.data_offset);
    return parse_npy_images(rewritten, path, ImageLayout::kNchw);
}

// One JPEG, PNG or PGM file decoded and fitted to the model's input by `resize` (JPEG without
// `resize`: only when it has the model's size).
Result<ImageArray> read_fitted(const std::vector<std::uint8_t>& bytes, const std::string& path, const ModelInput& model,
                               std::optional<ResizeMode> resize, PredictInputs& inputs) {
    ImageArray a;
    a.count = 1;
    a.channels = model.channels;
    a.height = model.height;
    a.width = model.width;
    a.u8.resize(a.example_size());
    ImageDecoder decoder;
    PSRUN_TRY_ASSIGN(
        auto d, decoder.decode(bytes, {model.channels, model.height, model.width, resize.value_or(ResizeMode::kCrop)},
                               a.u8, path));
    const int file_channels = d.converted ? 4 - model.channels : model.channels;
    if (d.resized && !resize)
        return bad_file(path, "images are " + shape_text(file_channels, d.height, d.width) + " (CxHxW) but the model " +
                                  model.name + " takes " + shape_text(model.channels, model.height, model.width) +
                                  ": resize the image to " + std::to_string(model.width) + "x" +
                                  std::to_string(model.height) + " pixels, or give --image-resize crop|pad|stretch");
    if (d.converted)
        inputs.notes.push_back(path + ": " +
                               (model.channels == 1 ? "colour image read as gray" : "gray image read as RGB") +
                               " for the model " + model.name);
    if (d.resized)
        inputs.notes.push_back(path + ": " + std::to_string(d.width) + "x" + std::to_string(d.height) +
                               " pixels fitted to " + std::to_string(model.width) + "x" + std::to_string(model.height) +
                               " (--image-resize " + to_string(*resize) + ")");
    return a;
}

Result<ImageArray> read_one(const std::string& path, const ModelInput& model, PredictInputs& inputs, bool& single,
                            std::optional<ResizeMode> resize) {
    auto bytes = read_maybe_gzip(path);
    if (!bytes) return make_error(ErrorCode::kInvalidArgument, bytes.error().message);
    single = false;
    const ImageFormat format = sniff_image(*bytes);
    if (format != ImageFormat::kUnknown && (resize || format == ImageFormat::kJpeg) &&
        (model.channels == 1 || model.channels == 3)) {
        single = true;
        return read_fitted(*bytes, path, model, resize, inputs);
    }
    if (looks_like_png(*bytes)) {
        single = true;
        PSRUN_TRY_ASSIGN(auto png, parse_png(*bytes, path, model.channels == 3 ? 3 : 1));
        if (png.converted)
            inputs.notes.push_back(path + ": " + (png.file_color ? "colour PNG read as gray" : "gray PNG read as RGB") +
                                   " for the model " + model.name);
        return std::move(png.image);
    }
    if (looks_like_pgm(*bytes)) {
        single = true;
        return parse_pgm(*bytes, path);
    }
    if (looks_like_npy(*bytes)) {
        PSRUN_TRY_ASSIGN(auto h, parse_npy_header(*bytes, path));
        if (h.shape.size() == 2) return parse_flat_npy(*bytes, h, path, model);
        const ImageDims dims{model.channels, model.height, model.width};
        return parse_npy_images(*bytes, path, ImageLayout::kAuto, &dims);
    }
    if (looks_like_idx(*bytes)) return parse_idx_images(*bytes, path);
    return bad_file(path,
                    "unknown image file type: give IDX images (as MNIST ships them), a NumPy .npy array, "
                    "or JPEG, PNG or PGM (P5/P2) files of single images");
}

// Appends `a` to `all` (same channels and type after the shape check; the first sets them).
void append(ImageArray& all, ImageArray&& a) {
    if (all.count == 0) {
        all = std::move(a);
        return;
    }
    if (all.type != a.type) {
        // Mixed uint8 and float32 files: keep everything float32, as training would read it.
        auto to_float = [](ImageArray& x) {
            if (x.type == PixelType::kFloat32) return;
            x.f32.resize(x.u8.size());
            for (std::size_t i = 0; i < x.u8.size(); ++i) x.f32[i] = static_cast<float>(x.u8[i]) / 255.0f;
            x.u8.clear();
            x.type = PixelType::kFloat32;
        };
        to_float(all);
        to_float(a);
    }
    all.u8.insert(all.u8.end(), a.u8.begin(), a.u8.end());
    all.f32.insert(all.f32.end(), a.f32.begin(), a.f32.end());
    all.count += a.count;
}

// Token ids or feature vectors: one .npy array of rows per file, appended in order.
Result<PredictInputs> load_example_rows(const std::vector<std::string>& paths, const ModelInput& model) {
    PredictInputs inputs;
    LabeledImages& all = inputs.images;
    for (const auto& path : paths) {
        LabeledImages part;
        PSRUN_TRY(load_example_inputs(path, model, ImageLayout::kAuto, part));
        conform_to_model(part, model);
        // Predict reads no targets: placeholders in the form the model predicts (class labels,
        // or vectors such as a click model's one probability), so that only the inputs are checked.
        part.labels.assign(part.size(), 0);
        part.target = model.target;
        if (model.target == TargetKind::kVector) {
            part.target_length = static_cast<std::size_t>(model.target_length);
            part.targets.assign(part.size() * part.target_length, 0.0f);
        }
        PSRUN_TRY(check_fits_model(part, SplitNames{path, path + " (no targets)"}, model));
        if (all.size() == 0) {
            all = std::move(part);
        } else {
            all.tokens.insert(all.tokens.end(), part.tokens.begin(), part.tokens.end());
            all.raw_tokens.insert(all.raw_tokens.end(), part.raw_tokens.begin(), part.raw_tokens.end());
            all.images.f32.insert(all.images.f32.end(), part.images.f32.begin(), part.images.f32.end());
            all.images.u8.insert(all.images.u8.end(), part.images.u8.begin(), part.images.u8.end());
            all.images.count += part.images.count;
            all.labels.insert(all.labels.end(), part.labels.begin(), part.labels.end());
        }
        inputs.names.insert(inputs.names.end(), part.size(), std::string());
    }
    return inputs;
}

}  // namespace

Result<PredictInputs> load_predict_inputs(const std::vector<std::string>& paths, const ModelInput& model,
                                          std::optional<ResizeMode> resize) {
    PredictInputs inputs;
    if (paths.empty()) return make_error(ErrorCode::kInvalidArgument, "no image files given");
    if (model.input != InputKind::kImage) return load_example_rows(paths, model);
    for (const auto& path : paths) {
        bool single = false;
        PSRUN_TRY_ASSIGN(auto a, read_one(path, model, inputs, single, resize));
        if (a.channels != model.channels || a.height != model.height || a.width != model.width)
            return bad_file(path, "images are " + a.shape() + " (CxHxW) but the model " + model.name + " takes " +
                                      shape_text(model.channels, model.height, model.width) +
                                      (single ? ": resize the image to " + std::to_string(model.width) + "x" +
                                                    std::to_string(model.height) + " pixels"
                                              : ""));
        inputs.names.insert(inputs.names.end(), a.count, single ? path : std::string());
        append(inputs.images.images, std::move(a));
    }
    inputs.images.labels.assign(inputs.images.images.count, 0);
    return inputs;
}

}  // namespace psrun::worker
