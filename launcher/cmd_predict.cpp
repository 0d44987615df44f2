#include "launcher/cmd_predict.h"

#include <bit>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <zlib.h>

#include "common/checkpoint_store.h"
#include "common/file_names.h"
#include "common/result.h"
#include "launcher/model_source.h"
#include "launcher/table_column_options.h"
#include "workerd/class_names.h"
#include "workerd/data/data_options.h"
#include "workerd/datasets.h"
#include "workerd/inference.h"
#include "workerd/input_columns.h"
#include "workerd/model_identity.h"
#include "workerd/nn/graph_loss.h"
#include "workerd/predict_inputs.h"
#include "workerd/table_split.h"

namespace psrun::launcher {
namespace {

struct PredictOptions {
    ModelSourceOptions source;
    std::vector<std::string> images;
    std::vector<std::string> inputs;  // --input NAME=FILE.npy: the model's inputs after the first
    std::string output;
    std::string image_resize;            // empty: what the model dir's classes.json records, else none
    std::string data;                    // --data F.csv: a table feeding every input by column
    std::string targets;                 // --targets: the table's target columns (default "label")
    worker::TableColumnOptions columns;  // --input-columns ...: how --data feeds the inputs
};

// --data F.csv with --input-columns: every input from the table's columns, hashed as training
// hashed them; rows are named by their index.
worker::PredictInputs load_table_inputs(const PredictOptions& o, const worker::InferenceModel& model) {
    auto spec = worker::parse_table_columns(o.columns);
    if (!spec) throw UsageError(spec.error().message);
    spec->targets_optional = true;  // new rows need no labels
    if (o.data.empty())
        throw UsageError("--input-columns reads the model's inputs from a CSV/TSV table: give --data F.csv");
    if (!o.images.empty() || !o.inputs.empty())
        throw UsageError("--input-columns reads every input from the --data table: drop --images and --input");
    auto table =
        worker::load_table_split(o.data, *spec, model.model, worker::split_list(o.targets), model.raw_inputs());
    if (!table) throw UsageError(table.error().message);
    worker::PredictInputs inputs;
    inputs.images = std::move(table->data);
    inputs.names.assign(inputs.images.size(), std::string());
    inputs.notes.push_back(table->description);
    return inputs;
}

// A version 1.0 .npy file of a little-endian float32 C-order array of `shape` (numpy's
// format: the header padded with spaces to a multiple of 64 bytes, ending in '\n').
std::string npy_f32(const std::vector<float>& values, const std::vector<std::size_t>& shape) {
    std::string dims;
    for (const auto d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    if (shape.size() == 1) dims += ",";  // a tuple of one: "(3,)"
    std::string dict = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", dims);
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

std::string npy_f32(const std::vector<float>& values, std::size_t rows, std::size_t cols) {
    return npy_f32(values, std::vector<std::size_t>{rows, cols});
}

// The inputs after the first that no head's scores depend on: what only the losses read (a
// segmentation's masks, a multi-label head's targets, a regression's targets), which predict
// feeds zeros when they are not given. Without heads: those only label losses read.
std::vector<std::string> loss_only_inputs(const nn::ModelDescription& model) {
    std::set<std::string, std::less<>> needed;  // values some head's scores are computed from
    if (!model.heads.empty()) {
        std::map<std::string, const nn::Node*, std::less<>> producer;
        for (const auto& node : model.nodes)
            for (const auto& o : node.outputs) producer.emplace(o, &node);
        std::vector<std::string> pending;
        for (const auto& h : model.heads) pending.push_back(h.value);
        while (!pending.empty()) {
            std::string value = std::move(pending.back());
            pending.pop_back();
            if (!needed.insert(value).second) continue;
            if (const auto it = producer.find(value); it != producer.end())
                for (const auto& in : it->second->inputs) pending.push_back(in);
        }
    }
    std::vector<std::string> out;
    for (std::size_t i = 1; i < model.inputs.size(); ++i) {
        const std::string& name = model.inputs[i].name;
        bool read = false, elsewhere = false;
        for (const auto& node : model.nodes)
            for (std::size_t k = 0; k < node.data_inputs && k < node.inputs.size(); ++k)
                if (node.inputs[k] == name) {
                    read = true;
                    elsewhere = elsewhere || !(nn::is_label_loss(node) && k == 1);
                }
        if (read && (model.heads.empty() ? !elsewhere : needed.count(name) == 0)) out.push_back(name);
    }
    return out;
}

// A head's predictions as an array [count, width, d1, ...].
std::string head_npy(const worker::HeadPrediction& h, std::size_t count) {
    std::vector<std::size_t> shape = {count, static_cast<std::size_t>(h.width)};
    for (const auto d : h.spatial) shape.push_back(static_cast<std::size_t>(d));
    return npy_f32(h.probabilities, shape);
}

// "float32 [count, width, d1, ...]".
std::string head_shape(const worker::HeadPrediction& h, std::size_t count) {
    std::string out = fmt::format("float32 [{}, {}", count, h.width);
    for (const auto d : h.spatial) out += fmt::format(", {}", d);
    return out + "]";
}

void put16(std::string& out, std::uint32_t v) {
    out += static_cast<char>(v & 0xff);
    out += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& out, std::uint32_t v) {
    put16(out, v & 0xffff);
    put16(out, v >> 16);
}

// A .npz archive (numpy's np.savez: a zip of NAME.npy members, stored uncompressed) of `arrays`
// (name, .npy bytes). Throws UsageError past the 4 GiB a zip without its 64-bit extension holds.
std::string npz_archive(const std::vector<std::pair<std::string, std::string>>& arrays) {
    std::string out, directory;
    for (const auto& [name, bytes] : arrays) {
        const std::string member = name + ".npy";
        if (bytes.size() >= 0xffffffffull || out.size() >= 0xffffffffull)
            throw UsageError("--output: the arrays are over 4 GiB, more than a .npz here holds: write .npy files");
        const auto crc = static_cast<std::uint32_t>(
            crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
        const auto offset = static_cast<std::uint32_t>(out.size());
        const auto size = static_cast<std::uint32_t>(bytes.size());
        auto common = [&](std::string& h) {  // version needed .. extra length
            put16(h, 20);
            put16(h, 0);     // flags
            put16(h, 0);     // stored
            put16(h, 0);     // time
            put16(h, 0x21);  // 1980-01-01
            put32(h, crc);
            put32(h, size);
            put32(h, size);
            put16(h, static_cast<std::uint32_t>(member.size()));
            put16(h, 0);
        };
        put32(out, 0x04034b50);
        common(out);
        out += member;
        out += bytes;
        put32(directory, 0x02014b50);
        put16(directory, 20);  // made by
        common(directory);
        put16(directory, 0);  // comment
        put16(directory, 0);  // disk
        put16(directory, 0);  // internal attributes
        put32(directory, 0);  // external attributes
        put32(directory, offset);
        directory += member;
    }
    const auto at = static_cast<std::uint32_t>(out.size());
    out += directory;
    put32(out, 0x06054b50);
    put16(out, 0);
    put16(out, 0);
    put16(out, static_cast<std::uint32_t>(arrays.size()));
    put16(out, static_cast<std::uint32_t>(arrays.size()));
    put32(out, static_cast<std::uint32_t>(directory.size()));
    put32(out, at);
    put16(out, 0);
    return out;
}

bool ends_with(const std::string& text, const std::string& tail) {
    return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// "probs.npy" and head "tags" -> "probs.tags.npy" (the head's name before the extension).
std::string head_file(const std::string& output, const std::string& head) {
    const std::filesystem::path path(output);
    return sibling_file(output, head, path.has_extension() ? path.extension().string() : std::string(".npy"));
}

void write_output(const std::string& given, const std::string& bytes) {
    // Absolute: write_file_atomically fsyncs the file's directory, which a bare name lacks.
    const std::string path = std::filesystem::absolute(given).string();
    if (auto wrote = write_file_atomically(path, bytes); !wrote)
        throw UsageError("--output " + given + ": " + wrote.error().message);
}

// A graph loss's heads (nn::Head): each head's softmax or sigmoid, printed per image or written
// (--output F.npz: one array per head, named by the head; any other F: one .npy per head, the
// head's name before F's extension; a single head: F itself).
void predict_heads(const PredictOptions& o, const worker::InferenceModel& model, const worker::PredictInputs& inputs,
                   const worker::DataRecord& record) {
    auto heads = worker::predict_heads(model, inputs.images, o.source.batch_size);
    if (!heads) throw std::runtime_error(heads.error().message);
    const std::size_t count = inputs.images.size();
    std::cerr << "psrun predict: " << count << (o.columns.any() ? " rows" : " images") << ", model "
              << worker::describe_model(model.model) << " from " << model.source << ", " << heads->size() << " head"
              << (heads->size() == 1 ? "" : "s") << "\n";
    if (!o.output.empty()) {
        if (ends_with(o.output, ".npz")) {
            std::vector<std::pair<std::string, std::string>> arrays;
            for (const auto& h : *heads) arrays.emplace_back(h.name, head_npy(h, count));
            write_output(o.output, npz_archive(arrays));
            std::cerr << "psrun predict: wrote " << o.output << " (";
            for (const auto& h : *heads)
                std::cerr << (&h == &heads->front() ? "" : ", ") << h.name << ": " << nn::to_string(h.kind) << " "
                          << head_shape(h, count);
            std::cerr << ")\n";
            return;
        }
        for (const auto& h : *heads) {
            const std::string file = heads->size() == 1 ? o.output : head_file(o.output, h.name);
            write_output(file, head_npy(h, count));
            std::cerr << "psrun predict: wrote " << file << " (head " << h.name << ", " << nn::to_string(h.kind) << ", "
                      << head_shape(h, count) << ")\n";
        }
        return;
    }
    for (const auto& h : *heads)
        if (!h.spatial.empty())
            throw UsageError("head " + h.name + " scores every position (" + head_shape(h, count) +
                             "): give --output F.npy (or .npz) for its per-position probabilities");
    // One line per image: its name, then per head "HEAD=CLASS:P" (softmax; the primary head
    // first as CLASS P [CLASS NAME], as for one head) or "HEAD=L1,L3" (sigmoid: the labels with
    // p >= 0.5, "-" for none) or "HEAD=V1,V2" (value: the predictions).
    const int primary = model.model.head.empty() ? -1 : model.model.head_index(model.model.head);
    std::string text;
    std::size_t index = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const std::string& name = inputs.names[i];
        text += name.empty() ? std::to_string(index++) : name;
        for (std::size_t k = 0; k < heads->size(); ++k) {
            const auto& h = (*heads)[k];
            const auto w = static_cast<std::size_t>(h.width);
            const float* p = h.probabilities.data() + i * w;
            if (h.kind == nn::HeadKind::kSoftmax) {
                const auto c = static_cast<std::size_t>(std::max_element(p, p + w) - p);
                if (static_cast<int>(k) == primary)
                    text += fmt::format(" {} {:.6f}{}", c, p[c],
                                        c < record.classes.size() ? " " + record.classes[c] : std::string());
                else text += fmt::format(" {}={}:{:.6f}", h.name, c, p[c]);
                continue;
            }
            if (h.kind == nn::HeadKind::kValue) {  // "HEAD=v1,v2,..."
                std::string values;
                for (std::size_t c = 0; c < w; ++c) values += fmt::format("{}{:.6g}", c ? "," : "", p[c]);
                text += fmt::format(" {}={}", h.name, values);
                continue;
            }
            std::string on;
            for (std::size_t c = 0; c < w; ++c) {
                if (p[c] < 0.5f) continue;
                if (!on.empty()) on += ',';
                on += std::to_string(c);  // no `"," + string` here: GCC 12 -O3 misreads it (-Wrestrict)
            }
            text += fmt::format(" {}={}", h.name, on.empty() ? std::string("-") : on);
        }
        text += "\n";
    }
    std::cout << text << std::flush;
}

void run_predict(const PredictOptions& o) {
    if (!o.data.empty() && !o.columns.any())
        throw UsageError("--data " + o.data +
                         " is a CSV/TSV table read by column: give --input-columns NAME=COL,... "
                         "(as in training; docs/data.md, Recommender tables)");
    if (o.images.empty() && !o.columns.any())
        throw UsageError(
            "give --images F [F...]: IDX, .npy, JPEG, PNG or PGM files (or --data F.csv --input-columns ...)");
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
    std::optional<worker::PredictInputs> inputs;
    if (o.columns.any()) {
        inputs = load_table_inputs(o, model);
        apply_normalization(o.source, inputs->images);
    } else {
        auto loaded =
            worker::load_predict_inputs(o.images, worker::model_input(model.model, model.raw_inputs()), resize);
        if (!loaded) throw UsageError(loaded.error().message);
        inputs = std::move(*loaded);
        apply_normalization(o.source, inputs->images);
        auto columns = worker::load_input_columns(model.model, o.inputs, "--input", inputs->images.size(), "--images",
                                                  model.raw_inputs(), loss_only_inputs(model.model));
        if (!columns) throw UsageError(columns.error().message);
        inputs->images.columns = std::move(*columns);
    }
    for (const auto& note : inputs->notes) std::cerr << "psrun predict: " << note << "\n";
    const auto& m = model.model;
    if (m.loss == nn::LossKind::kGraph && (m.heads.size() > 1 || (m.heads.size() == 1 && m.head.empty())))
        return predict_heads(o, model, *inputs, record);
    auto probs = worker::predict_probabilities(model, inputs->images, o.source.batch_size);
    if (!probs) throw std::runtime_error(probs.error().message);
    const auto classes = static_cast<std::size_t>(model.model.classes);
    const std::size_t count = inputs->images.size();
    std::cerr << "psrun predict: " << count << (o.columns.any() ? " rows" : " images") << ", model "
              << worker::describe_model(model.model) << " from " << model.source << "\n";
    if (!o.output.empty()) {
        const std::string npy = npy_f32(*probs, count, classes);
        write_output(o.output, ends_with(o.output, ".npz") ? npz_archive({{"probabilities", npy}}) : npy);
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
        "predict",
        "classify images (IDX, .npy, JPEG, PNG, PGM) with a trained model; prints FILE CLASS PROBABILITY "
        "[CLASS NAME]");
    add_model_source_options(*cmd, o->source);
    cmd->add_option("--images", o->images, "IDX or .npy files of images, or JPEG/PNG/PGM files of one image each")
        ->expected(1, -1);
    cmd->add_option("--data", o->data,
                    "with --input-columns: a CSV/TSV table (gzip allowed) feeding every input by column, one "
                    "prediction per row, named by its index from 0 (target columns, if the table has them, are "
                    "not used)");
    cmd->add_option("--targets", o->targets, "with --data: the table's target columns (default label)");
    add_table_column_options(*cmd, o->columns, "--data");
    cmd->add_option("--input", o->inputs,
                    "NAME=FILE.npy: a model with several inputs reads its input NAME (one after the first) from "
                    "FILE.npy, one row per image of --images, in order; repeat per input")
        ->expected(1)
        ->take_all();
    cmd->add_option("--image-resize", o->image_resize,
                    "fit single images of another size to the model: crop, pad or stretch (default: what training "
                    "from --train-data recorded in the model dir, else none: the size must match)");
    cmd->add_option("--output", o->output,
                    "write the probabilities as a float32 .npy [images, classes] here instead of printing; F.npz: "
                    "an archive with one array per head (a graph loss's heads; else \"probabilities\"); a model "
                    "of several heads given F.npy writes one F.<head>.npy per head");
    cmd->callback([o, &exit_code] {
        run_predict(*o);
        exit_code = kExitOk;
    });
}

}  // namespace psrun::launcher
