// `psrun model check MODEL [--input [NAME=]X.npy ...] [--labels Y.npy] [--batch N] [--gradients F.json]`:
// the whole-network gradient check (workerd/nn/gradient_check.h) on one batch, a line per
// trainable tensor and the worst one last. Exit 0 when every tensor's gradient agrees with the
// loss's own change within --tolerance, 1 when one does not, 2 for usage errors.
#include "launcher/cmd_model_check.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <limits>
#include <nlohmann/json.hpp>

#include "common/option_checks.h"
#include "common/result.h"
#include "common/utf8.h"
#include "launcher/gradients_file.h"
#include "workerd/data/npy_reader.h"
#include "workerd/data/reader_common.h"
#include "workerd/nn/gradient_check.h"
#include "workerd/nn/model_summary.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/onnx/model_loader.h"

namespace psrun::launcher {

namespace {

struct CheckOptions {
    std::string model;
    std::vector<std::string> inputs;  // "FILE" (the primary input) or "NAME=FILE", each input at most once
    std::string labels;
    std::string gradients;
    std::int64_t batch = 8;
    std::uint64_t seed = 1;
    double tolerance = 0.05;
    bool json = false;
    bool no_finite_differences = false;
    bool input_gradients = false;
    bool no_bf16 = false;
};

// A .npy array as doubles (float32/64, int8-64, uint8-64; little or big endian) and its shape.
struct Array {
    std::vector<double> values;
    std::vector<std::uint64_t> shape;
};

Array read_array(const std::string& path) {
    auto bytes = worker::read_maybe_gzip(path);
    if (!bytes) throw UsageError(bytes.error().message);
    auto header = worker::parse_npy_header(*bytes, path);
    if (!header) throw UsageError(header.error().message);
    const auto& h = *header;
    const bool ok_kind = (h.kind == 'f' && (h.item_bytes == 4 || h.item_bytes == 8)) || h.kind == 'i' || h.kind == 'u';
    if (!ok_kind) throw UsageError(path + ": dtype " + h.descr + " (use float32, float64 or an integer type)");
    std::uint64_t count = 1;
    for (const auto d : h.shape) count *= d;
    if (bytes->size() < h.data_offset || (bytes->size() - h.data_offset) / h.item_bytes < count)
        throw UsageError(path + ": the file is shorter than its shape says");
    Array a;
    a.shape = h.shape;
    a.values.reserve(count);
    for (std::uint64_t e = 0; e < count; ++e) {
        unsigned char b[8] = {};
        for (std::size_t k = 0; k < h.item_bytes; ++k)
            b[h.big_endian ? h.item_bytes - 1 - k : k] = (*bytes)[h.data_offset + e * h.item_bytes + k];
        std::uint64_t raw = 0;
        for (std::size_t k = 0; k < h.item_bytes; ++k) raw |= static_cast<std::uint64_t>(b[k]) << (8 * k);
        double v = 0;
        if (h.kind == 'f' && h.item_bytes == 4) v = std::bit_cast<float>(static_cast<std::uint32_t>(raw));
        else if (h.kind == 'f') v = std::bit_cast<double>(raw);
        else if (h.kind == 'u') v = static_cast<double>(raw);
        else {
            const unsigned shift = static_cast<unsigned>(64 - 8 * h.item_bytes);
            v = static_cast<double>(static_cast<std::int64_t>(raw << shift) >> shift);
        }
        a.values.push_back(v);
    }
    return a;
}

// The rows of the model's first embedding table (ids drawn below it), or 0.
std::int64_t id_range(const nn::ModelDescription& model) {
    for (const auto& t : model.tensors)
        for (const auto& node : model.nodes)
            if (node.name == t.owner && (node.op == "embedding" || node.op == "gather") && t.shape.size() == 2)
                return t.shape[0];
    return 0;
}

// The --input files by model input index: "FILE" is the primary input's, "NAME=FILE" the
// input NAME's. Unknown names and an input given twice are usage errors.
std::vector<std::string> input_files(const nn::ModelDescription& model, const CheckOptions& o) {
    std::vector<std::string> files(model.inputs.size());
    for (const auto& arg : o.inputs) {
        const auto eq = arg.find('=');
        std::size_t index = 0;
        std::string file = arg;
        if (eq != std::string::npos && model.input_index(arg.substr(0, eq)) >= 0) {
            index = static_cast<std::size_t>(model.input_index(arg.substr(0, eq)));
            file = arg.substr(eq + 1);
        } else if (eq != std::string::npos && eq > 0 && arg.find('/') > eq) {
            std::string names;
            for (const auto& in : model.inputs) names += (names.empty() ? "" : ", ") + in.name;
            throw UsageError("--input " + arg + ": the model has no input '" + arg.substr(0, eq) +
                             "' (its inputs: " + names + ")");
        }
        if (file.empty()) throw UsageError("--input " + arg + ": no file after '='");
        if (!files[index].empty())
            throw UsageError("--input " + arg + ": the input " + model.inputs[index].name + " is already given (" +
                             files[index] + ")");
        files[index] = file;
    }
    return files;
}

nn::CheckBatch make_batch(const nn::ModelDescription& model, const CheckOptions& o) {
    nn::CheckBatch batch;
    std::mt19937_64 rng(o.seed);
    const auto files = input_files(model, o);
    std::string rows_from;  // the first file, whose row count every other must match
    batch.size = o.batch;
    for (std::size_t i = 0; i < files.size() && rows_from.empty(); ++i)
        if (!files[i].empty()) {
            const Array x = read_array(files[i]);
            batch.size = x.shape.empty() ? 0 : static_cast<std::int64_t>(x.shape[0]);
            rows_from = files[i];
        }
    for (std::size_t i = 0; i < model.inputs.size(); ++i) {
        const nn::InputDef& in = model.inputs[i];
        nn::CheckInput values;
        const std::int64_t per_example = nn::elements_per_example(in.info.dims).value_or(0);
        const bool ids = in.info.type == nn::ElementType::kInt;
        if (model.fed_by_labels(i) && files[i].empty()) {
            // A graph loss's label input: the labels below feed it.
            if (ids) values.ids.assign(static_cast<std::size_t>(batch.size * per_example), 0);
            else values.values.assign(static_cast<std::size_t>(batch.size * per_example), 0.0f);
        } else if (!files[i].empty()) {
            const Array x = read_array(files[i]);
            if (x.shape.empty() || per_example <= 0 || x.values.size() % static_cast<std::size_t>(per_example) != 0 ||
                x.values.size() / static_cast<std::size_t>(per_example) != x.shape[0])
                throw UsageError(files[i] + ": its rows are not examples of the model's input " + in.name + " " +
                                 nn::shape_text(in.info.dims));
            if (static_cast<std::int64_t>(x.shape[0]) != batch.size)
                throw UsageError(files[i] + " has " + std::to_string(x.shape[0]) + " rows and " + rows_from + " has " +
                                 std::to_string(batch.size) + ": every input needs one row per example");
            for (const double v : x.values) {
                if (ids) values.ids.push_back(static_cast<std::int32_t>(v));
                else values.values.push_back(static_cast<float>(v));
            }
        } else {
            const auto n = static_cast<std::size_t>(batch.size * per_example);
            if (ids) {
                const std::int64_t range = id_range(model);
                if (range < 1)
                    throw UsageError(
                        "the model's input " + in.name +
                        " holds ids and the model has no embedding table to draw them from: give --input " + in.name +
                        "=IDS.npy");
                std::uniform_int_distribution<std::int32_t> draw(0, static_cast<std::int32_t>(range - 1));
                for (std::size_t k = 0; k < n; ++k) values.ids.push_back(draw(rng));
            } else {
                std::uniform_real_distribution<float> draw(0.0f, 1.0f);
                for (std::size_t k = 0; k < n; ++k) values.values.push_back(draw(rng));
            }
        }
        batch.inputs.push_back(std::move(values));
    }
    const std::string labels_file =
        !o.labels.empty() || model.label_input < 0 ? o.labels : files[static_cast<std::size_t>(model.label_input)];
    if (!labels_file.empty()) {
        const Array y = read_array(labels_file);
        if (y.shape.empty() || y.shape[0] != static_cast<std::uint64_t>(batch.size))
            throw UsageError(labels_file + ": " + std::to_string(y.shape.empty() ? 0 : y.shape[0]) + " rows for " +
                             std::to_string(batch.size) + " examples");
        for (const double v : y.values) {
            if (model.classification()) batch.labels.push_back(static_cast<std::int32_t>(v));
            else batch.targets.push_back(static_cast<float>(v));
        }
    } else if (!model.labels_used()) {
        // A graph loss without a label input reads no labels.
    } else if (model.classification()) {
        std::uniform_int_distribution<std::int32_t> draw(0, static_cast<std::int32_t>(model.classes - 1));
        for (std::int64_t i = 0; i < batch.size; ++i) batch.labels.push_back(draw(rng));
    } else {
        std::uniform_real_distribution<float> draw(0.0f, 1.0f);
        for (std::int64_t i = 0; i < batch.size * model.classes; ++i) batch.targets.push_back(draw(rng));
    }
    return batch;
}

int run_check(const CheckOptions& o) {
    if (o.batch < 1 || o.batch > 4096) throw UsageError("--batch " + std::to_string(o.batch) + ": give 1 to 4096");
    if (!(o.tolerance > 0 && o.tolerance < 1)) throw UsageError("--tolerance must be in (0, 1)");
    auto model = onnx_io::load_any_model(o.model);
    if (!model) throw UsageError(model.error().message);
    for (const auto& warning : model->import_warnings) std::cerr << "psrun model check: warning: " << warning << "\n";
    const nn::CheckBatch batch = make_batch(*model, o);
    std::vector<float> params(static_cast<std::size_t>(model->parameter_count));
    nn::initialize_parameters(*model, o.seed, params);
    nn::GradientCheckOptions options;
    options.seed = o.seed;
    options.finite_differences = !o.no_finite_differences;
    options.compare_bf16 = !o.no_bf16;
    // x.detach() makes the gradient differ from the loss's derivative on purpose (a straight-through
    // estimator): central differences would measure the derivative, so they are not run.
    const auto stop = std::find_if(model->nodes.begin(), model->nodes.end(),
                                   [](const nn::Node& n) { return n.op == "stop_gradient"; });
    if (options.finite_differences && stop != model->nodes.end()) {
        std::cerr << "psrun model check: the network stops gradients (stop_gradient '" << stop->name
                  << "', x.detach()), so its gradient is not the loss's derivative and central differences cannot "
                     "check it: gradients only (compare them with PyTorch's: --gradients)\n";
        options.finite_differences = false;
    }
    options.input_gradients = o.input_gradients;
    if (o.input_gradients && o.gradients.empty())
        throw UsageError("--input-gradients writes into the --gradients file: give --gradients F.json");
    auto check = nn::check_gradients(*model, params, batch, options);
    if (!check) throw UsageError(check.error().message);
    if (!o.gradients.empty()) write_gradients_file(o.gradients, *model, *check);
    const nn::TensorCheck* worst = nullptr;
    for (const auto& t : check->tensors)
        if (worst == nullptr || t.relative_error > worst->relative_error) worst = &t;
    const bool ok = worst == nullptr || !(worst->relative_error > o.tolerance);
    if (o.json) {
        nlohmann::json doc = {{"model", model->name},     {"batch", batch.size},
                              {"loss", check->loss},      {"ok", ok},
                              {"tolerance", o.tolerance}, {"tensors", nlohmann::json::array()}};
        for (const auto& t : check->tensors) {
            nlohmann::json row = {{"name", t.name},
                                  {"shape", t.shape},
                                  {"gradient_norm", t.gradient_norm},
                                  {"finite_difference", t.finite_difference},
                                  {"relative_error", t.relative_error}};
            if (t.bf16_error) row["bf16_error"] = *t.bf16_error;
            doc["tensors"].push_back(row);
        }
        if (!check->bf16_note.empty()) doc["bf16_note"] = check->bf16_note;
        std::cout << json_text(doc, 2) << std::endl;
    } else {
        std::printf("model %s, batch %lld, loss %.6f\n", model->name.c_str(), static_cast<long long>(batch.size),
                    check->loss);
        std::printf("%-40s %14s %14s %10s %10s\n", "tensor", "|gradient|", "loss change", "rel error", "bf16 err");
        for (const auto& t : check->tensors)
            std::printf("%-40s %14.6g %14.6g %10.2e %10s\n", t.name.c_str(), t.gradient_norm, t.finite_difference,
                        t.relative_error, t.bf16_error ? std::to_string(*t.bf16_error).c_str() : "-");
        if (!check->bf16_note.empty()) std::printf("%s\n", check->bf16_note.c_str());
        if (worst != nullptr)
            std::printf("worst: %s, relative error %.2e (tolerance %.2e): %s\n", worst->name.c_str(),
                        worst->relative_error, o.tolerance, ok ? "ok" : "FAILED");
    }
    return ok ? kExitOk : kExitFailure;
}

}  // namespace

void add_model_check_command(CLI::App& model, int& exit_code) {
    auto o = std::make_shared<CheckOptions>();
    CLI::App* check = model.add_subcommand(
        "check", "one batch forward and backward; each tensor's gradient against the loss's own change along it");
    check->add_option("model", o->model, "a built-in name, a FILE.json or a FILE.onnx")->required();
    check
        ->add_option("--input", o->inputs,
                     "the batch's inputs as .npy (float [N, ...] or integer ids [N, L]): FILE for the primary input, "
                     "NAME=FILE for the input NAME (repeat for several inputs); default: random")
        ->expected(1)
        ->take_all();
    check->add_option("--labels", o->labels, "the batch's labels (or targets) as .npy; default: random");
    check->add_option("--batch", o->batch, "examples in a random batch (1-4096; default 8)")
        ->check(integer_in(1, 4096));
    check->add_option("--seed", o->seed, "parameters of a JSON model, random batch, dropout masks (default 1)")
        ->check(integer_in(0, std::numeric_limits<std::int64_t>::max()));
    check->add_option("--tolerance", o->tolerance, "largest relative error that passes (default 0.05)")
        ->check(number_above(0, 1e6));
    check->add_option("--gradients", o->gradients,
                      "write the batch's outputs and every trainable tensor's f32 gradient here (JSON, by name)");
    check->add_flag("--input-gradients", o->input_gradients,
                    "also write dL/d(input) of every float input into the --gradients file (\"inputs\", by name)");
    check->add_flag("--no-bf16", o->no_bf16,
                    "do not also train the batch in bf16 (no bf16 column, no bf16_gradient in --gradients)");
    check->add_flag("--json", o->json, "print the report as JSON");
    check->add_flag("--no-finite-differences", o->no_finite_differences,
                    "only compute the gradients (--gradients) and bf16's, not the loss's change along them");
    check->callback([o, &exit_code] {
        try {
            exit_code = run_check(*o);
        } catch (const UsageError& e) {
            std::cerr << "psrun model check: " << e.what() << "\n";
            exit_code = kExitUsage;
        }
    });
}

}  // namespace psrun::launcher
