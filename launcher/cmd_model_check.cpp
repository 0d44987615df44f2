// `psrun model check MODEL [--input X.npy] [--labels Y.npy] [--batch N] [--gradients F.json]`:
// the whole-network gradient check (workerd/nn/gradient_check.h) on one batch, a line per
// trainable tensor and the worst one last. Exit 0 when every tensor's gradient agrees with the
// loss's own change within --tolerance, 1 when one does not, 2 for usage errors.
#include "launcher/cmd_model_check.h"

#include <bit>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <limits>

#include "common/result.h"
#include "common/option_checks.h"
#include "common/utf8.h"
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
    std::string input;
    std::string labels;
    std::string gradients;
    std::int64_t batch = 8;
    std::uint64_t seed = 1;
    double tolerance = 0.05;
    bool json = false;
    bool no_finite_differences = false;
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

nn::CheckBatch make_batch(const nn::ModelDescription& model, const CheckOptions& o) {
    nn::CheckBatch batch;
    const std::int64_t per_example = nn::elements_per_example(model.input.dims).value_or(0);
    const bool ids = model.input.type == nn::ElementType::kInt;
    std::mt19937_64 rng(o.seed);
    if (!o.input.empty()) {
        const Array x = read_array(o.input);
        if (x.shape.empty() || per_example <= 0 || x.values.size() % static_cast<std::size_t>(per_example) != 0 ||
            x.values.size() / static_cast<std::size_t>(per_example) != x.shape[0])
            throw UsageError(o.input + ": its rows are not examples of the model's input " + nn::shape_text(model.input.dims));
        batch.size = static_cast<std::int64_t>(x.shape[0]);
        for (const double v : x.values) {
            if (ids) batch.ids.push_back(static_cast<std::int32_t>(v));
            else batch.input.push_back(static_cast<float>(v));
        }
    } else {
        batch.size = o.batch;
        const auto n = static_cast<std::size_t>(o.batch * per_example);
        if (ids) {
            const std::int64_t range = id_range(model);
            if (range < 1) throw UsageError("the model reads ids and has no embedding table to draw them from: give --input IDS.npy");
            std::uniform_int_distribution<std::int32_t> draw(0, static_cast<std::int32_t>(range - 1));
            for (std::size_t i = 0; i < n; ++i) batch.ids.push_back(draw(rng));
        } else {
            std::uniform_real_distribution<float> draw(0.0f, 1.0f);
            for (std::size_t i = 0; i < n; ++i) batch.input.push_back(draw(rng));
        }
    }
    if (!o.labels.empty()) {
        const Array y = read_array(o.labels);
        if (y.shape.empty() || y.shape[0] != static_cast<std::uint64_t>(batch.size))
            throw UsageError(o.labels + ": " + std::to_string(y.shape.empty() ? 0 : y.shape[0]) + " rows for " +
                             std::to_string(batch.size) + " examples");
        for (const double v : y.values) {
            if (model.classification()) batch.labels.push_back(static_cast<std::int32_t>(v));
            else batch.targets.push_back(static_cast<float>(v));
        }
    } else if (model.classification()) {
        std::uniform_int_distribution<std::int32_t> draw(0, static_cast<std::int32_t>(model.classes - 1));
        for (std::int64_t i = 0; i < batch.size; ++i) batch.labels.push_back(draw(rng));
    } else {
        std::uniform_real_distribution<float> draw(0.0f, 1.0f);
        for (std::int64_t i = 0; i < batch.size * model.classes; ++i) batch.targets.push_back(draw(rng));
    }
    return batch;
}

void write_gradients(const std::string& path, const nn::ModelDescription& model, const nn::GradientCheck& check) {
    nlohmann::json doc = {{"loss", check.loss}, {"tensors", nlohmann::json::object()}};
    for (const auto& t : model.tensors) {
        if (t.cls != nn::TensorClass::kTrainable) continue;
        const auto begin = check.gradients.begin() + t.offset;
        doc["tensors"][t.name] = {{"shape", t.shape}, {"gradient", std::vector<float>(begin, begin + t.size)}};
    }
    std::ofstream out(path);
    out << json_text(doc);
    if (!out) throw UsageError("cannot write " + path);
}

int run_check(const CheckOptions& o) {
    if (o.batch < 1 || o.batch > 4096) throw UsageError("--batch " + std::to_string(o.batch) + ": give 1 to 4096");
    if (!(o.tolerance > 0 && o.tolerance < 1)) throw UsageError("--tolerance must be in (0, 1)");
    auto model = onnx_io::load_any_model(o.model);
    if (!model) throw UsageError(model.error().message);
    const nn::CheckBatch batch = make_batch(*model, o);
    std::vector<float> params(static_cast<std::size_t>(model->parameter_count));
    nn::initialize_parameters(*model, o.seed, params);
    nn::GradientCheckOptions options;
    options.seed = o.seed;
    options.finite_differences = !o.no_finite_differences;
    auto check = nn::check_gradients(*model, params, batch, options);
    if (!check) throw UsageError(check.error().message);
    if (!o.gradients.empty()) write_gradients(o.gradients, *model, *check);
    const nn::TensorCheck* worst = nullptr;
    for (const auto& t : check->tensors)
        if (worst == nullptr || t.relative_error > worst->relative_error) worst = &t;
    const bool ok = worst == nullptr || !(worst->relative_error > o.tolerance);
    if (o.json) {
        nlohmann::json doc = {{"model", model->name}, {"batch", batch.size}, {"loss", check->loss}, {"ok", ok},
                              {"tolerance", o.tolerance}, {"tensors", nlohmann::json::array()}};
        for (const auto& t : check->tensors) {
            nlohmann::json row = {{"name", t.name}, {"shape", t.shape}, {"gradient_norm", t.gradient_norm},
                                  {"finite_difference", t.finite_difference}, {"relative_error", t.relative_error}};
            if (t.bf16_error) row["bf16_error"] = *t.bf16_error;
            doc["tensors"].push_back(row);
        }
        if (!check->bf16_note.empty()) doc["bf16_note"] = check->bf16_note;
        std::cout << json_text(doc, 2) << std::endl;
    } else {
        std::printf("model %s, batch %lld, loss %.6f\n", model->name.c_str(), static_cast<long long>(batch.size), check->loss);
        std::printf("%-40s %14s %14s %10s %10s\n", "tensor", "|gradient|", "loss change", "rel error", "bf16 err");
        for (const auto& t : check->tensors)
            std::printf("%-40s %14.6g %14.6g %10.2e %10s\n", t.name.c_str(), t.gradient_norm, t.finite_difference,
                        t.relative_error, t.bf16_error ? std::to_string(*t.bf16_error).c_str() : "-");
        if (!check->bf16_note.empty()) std::printf("%s\n", check->bf16_note.c_str());
        if (worst != nullptr)
            std::printf("worst: %s, relative error %.2e (tolerance %.2e): %s\n", worst->name.c_str(), worst->relative_error,
                        o.tolerance, ok ? "ok" : "FAILED");
    }
    return ok ? kExitOk : kExitFailure;
}

}  // namespace

void add_model_check_command(CLI::App& model, int& exit_code) {
    auto o = std::make_shared<CheckOptions>();
    CLI::App* check = model.add_subcommand(
        "check", "one batch forward and backward; each tensor's gradient against the loss's own change along it");
    check->add_option("model", o->model, "a built-in name, a FILE.json or a FILE.onnx")->required();
    check->add_option("--input", o->input, "the batch's inputs as .npy (float [N, ...] or integer ids [N, L]); default: random");
    check->add_option("--labels", o->labels, "the batch's labels (or targets) as .npy; default: random");
    check->add_option("--batch", o->batch, "examples in a random batch (1-4096; default 8)")
        ->check(integer_in(1, 4096));
    check->add_option("--seed", o->seed, "parameters of a JSON model, random batch, dropout masks (default 1)")
        ->check(integer_in(0, std::numeric_limits<std::int64_t>::max()));
    check->add_option("--tolerance", o->tolerance, "largest relative error that passes (default 0.05)")
        ->check(number_above(0, 1e6));
    check->add_option("--gradients", o->gradients, "write every trainable tensor's f32 gradient here (JSON, by name)");
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
