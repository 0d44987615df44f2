#include "launcher/cmd_predict.h"

#include <bit>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/checkpoint_store.h"
#include "common/result.h"
#include "launcher/model_source.h"
#include "workerd/class_names.h"
#include "workerd/datasets.h"
#include "workerd/inference.h"
#include "workerd/input_columns.h"
#include "workerd/model_identity.h"
#include "workerd/predict_inputs.h"

namespace psrun::launcher {
namespace {

struct PredictOptions {
    ModelSourceOptions source;
    std::vector<std::string> images;
    std::vector<std::string> inputs;  // --input NAME=FILE.npy: the model's inputs after the first
    std::string output;
    std::string image_resize;  // empty: what the model dir's classes.json records, else none
};

// A version 1.0 .npy file of a little-endian float32 C-order array [rows, cols] (numpy's
// format: the header padded with spaces to a multiple of 64 bytes, ending in '\n').
std::string npy_f32(const std::vector<float>& values, std::size_t rows, std::size_t cols) {
    std::string dict = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
    dict.append(63 - (10 + dict.size()) % 64, ' ');
    dict += '\n';
    std::string out = "\x93NUMPY";
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(dict.size() & 0xff);
    out += static_cast<char>(dict.size() >> 8);
    out += dict;
    static_assert(std::endian::native == std::endian::little, "the .npy writer assumes a little-endian host");
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    return out;
}

void run_predict(const PredictOptions& o) {
    if (o.images.empty()) throw UsageError("give --images F [F...]: IDX, .npy, JPEG, PNG or PGM files");
    const worker::InferenceModel model = load_model_source(o.source);
    worker::DataRecord record;
    if (!o.source.model_dir.empty()) {
        auto read = worker::read_data_record(o.source.model_dir);
        if (!read) throw UsageError(read.error().message);
        record = std::move(*read);
    }
    std::optional<worker::ResizeMode> resize;
    const std::string mode = o.image_resize.empty() ? record.image_resize : o.image_resize;
    if (!mode.empty()) {
        auto parsed = worker::parse_resize_mode(mode);
        if (!parsed) throw UsageError(parsed.error().message);
        resize = *parsed;
    }
    auto inputs = worker::load_predict_inputs(o.images, worker::model_input(model.model), resize);
    if (!inputs) throw UsageError(inputs.error().message);
    apply_normalization(o.source, inputs->images);
    auto columns = worker::load_input_columns(model.model, o.inputs, "--input", inputs->images.size(),
                                              "--images");
    if (!columns) throw UsageError(columns.error().message);
    inputs->images.columns = std::move(*columns);
    for (const auto& note : inputs->notes) std::cerr << "psrun predict: " << note << "\n";
    auto probs = worker::predict_probabilities(model, inputs->images, o.source.batch_size);
    if (!probs) throw std::runtime_error(probs.error().message);
    const auto classes = static_cast<std::size_t>(model.model.classes);
    const std::size_t count = inputs->images.size();
    std::cerr << "psrun predict: " << count << " images, model " << worker::describe_model(model.model) << " from "
              << model.source << "\n";
    if (!o.output.empty()) {
        // Absolute: write_file_atomically fsyncs the file's directory, which a bare name lacks.
        const std::string path = std::filesystem::absolute(o.output).string();
        if (auto wrote = write_file_atomically(path, npy_f32(*probs, count, classes)); !wrote)
            throw UsageError("--output " + o.output + ": " + wrote.error().message);
        std::cerr << "psrun predict: wrote " << o.output << " (float32 [" << count << ", " << classes << "])\n";
        return;
    }
    const auto predicted = worker::arg_max(*probs, model.model.classes);
    std::string text;
    std::size_t index = 0;  // across the IDX/.npy files
    for (std::size_t i = 0; i < count; ++i) {
        const std::string& name = inputs->names[i];
        const float p = (*probs)[i * classes + static_cast<std::size_t>(predicted[i])];
        const auto c = static_cast<std::size_t>(predicted[i]);
        text += fmt::format("{} {} {:.6f}{}\n", name.empty() ? std::to_string(index++) : name, predicted[i], p,
                            c < record.classes.size() ? " " + record.classes[c] : std::string());
    }
    std::cout << text << std::flush;
}

}  // namespace

void add_predict_command(CLI::App& app, int& exit_code) {
    auto o = std::make_shared<PredictOptions>();
    CLI::App* cmd = app.add_subcommand(
        "predict", "classify images (IDX, .npy, JPEG, PNG, PGM) with a trained model; prints FILE CLASS PROBABILITY "
                   "[CLASS NAME]");
    add_model_source_options(*cmd, o->source);
    cmd->add_option("--images", o->images, "IDX or .npy files of images, or JPEG/PNG/PGM files of one image each")
        ->expected(1, -1);
    cmd->add_option("--input", o->inputs,
                    "NAME=FILE.npy: a model with several inputs reads its input NAME (one after the first) from "
                    "FILE.npy, one row per image of --images, in order; repeat per input")
        ->expected(1)
        ->take_all();
    cmd->add_option("--image-resize", o->image_resize,
                    "fit single images of another size to the model: crop, pad or stretch (default: what training "
                    "from --train-data recorded in the model dir, else none: the size must match)");
    cmd->add_option("--output", o->output,
                    "write the probabilities as a float32 .npy [images, classes] here instead of printing");
    cmd->callback([o, &exit_code] {
        run_predict(*o);
        exit_code = kExitOk;
    });
}

}  // namespace psrun::launcher
