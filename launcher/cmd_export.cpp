#include "launcher/cmd_export.h"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/checkpoint_params.h"
#include "common/checkpoint_store.h"
#include "common/checkpointer.h"
#include "common/option_checks.h"
#include "common/result.h"
#include "workerd/keyed_checkpoint.h"
#include "workerd/keyed_export.h"
#include "workerd/model_identity.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/parameter_set.h"
#include "workerd/run_recipe.h"

namespace psrun::launcher {

namespace {

// ", heads logits [N x 10], tag_logits [N x 4]": a graph loss's heads, outputs beside its loss.
std::string heads_text(const nn::ModelDescription& model) {
    std::string out;
    for (const auto& h : model.heads) {
        out +=
            (out.empty() ? std::string(", heads ") : std::string(", ")) + h.value + " [N x " + std::to_string(h.width);
        for (const auto d : h.spatial) out += " x " + std::to_string(d);
        out += "]";
    }
    return out;
}

struct ExportOptions {
    std::string model_dir;
    std::optional<std::int64_t> checkpoint;
    std::string output;
    bool ema = false;  // the checkpoint's moving average of the weights
};

std::string steps_text(const std::vector<CheckpointInfo>& all) {
    std::string s;
    for (const auto& c : all) s += (s.empty() ? "" : ", ") + std::to_string(c.step);
    return s;
}

// The checkpoint to export: the named step, or the newest.
CheckpointInfo choose(const ExportOptions& o) {
    const CheckpointStore store(o.model_dir, 1);
    const auto all = store.list();
    if (all.empty())
        throw UsageError("--model-dir " + o.model_dir +
                         " holds no checkpoint (ckpt-<step>/): export reads what a "
                         "run with psd saved there (psrun local --ps 1 ... -- --model-dir " +
                         o.model_dir + ")");
    if (!o.checkpoint) return all.back();
    for (const auto& c : all)
        if (c.step == *o.checkpoint) return c;
    throw UsageError("--checkpoint " + std::to_string(*o.checkpoint) + ": no such checkpoint in " + o.model_dir +
                     " (steps: " + steps_text(all) + ")");
}

void run_export(const ExportOptions& o) {
    const CheckpointInfo info = choose(o);
    auto manifest = CheckpointStore::read_manifest(info);
    if (!manifest) throw UsageError("checkpoint " + info.dir + ": " + manifest.error().message);
    auto model = worker::model_from_record(manifest_model(*manifest), "checkpoint " + info.dir, nn::ModelDescription{});
    if (!model) throw UsageError(model.error().message);
    // Tables keyed by raw ids (--raw-ids): their rows by id, exported as tables of their rows
    // with the id map beside the graph (workerd/keyed_export.h).
    auto tensors = worker::wire_tensors(worker::model_tensors(*model));
    auto keyed = worker::mark_keyed_tables(*manifest, *model, tensors, worker::recorded_run_seed(o.model_dir),
                                           "checkpoint " + info.dir);
    if (!keyed) throw UsageError(keyed.error().message);
    // An ONNX file is one protobuf message of at most 2 GiB; psrun export does not write external data.
    constexpr std::int64_t kMaxOnnxFloats = (std::int64_t{1} << 31) / 4 - (std::int64_t{1} << 20);
    if (keyed->empty() && model->parameter_count > kMaxOnnxFloats)
        throw UsageError(
            fmt::format("checkpoint {}: model {} has {} parameters ({:.1f} GB as f32, e.g. a large sparse "
                        "table); an ONNX file holds at most 2 GiB and psrun export does not write ONNX "
                        "external data: serve the model from the checkpoint (psrun eval/predict need the "
                        "whole table in memory too)",
                        info.dir, model->name, model->parameter_count, double(model->parameter_count) * 4 / 1e9));
    auto params = load_checkpoint_parameters(info.dir, tensors,
                                             o.ema ? CheckpointValues::kAverage : CheckpointValues::kParameters);
    if (!params && params.error().code == ErrorCode::kNotFound) throw UsageError("--ema: " + params.error().message);
    if (!params) {
        std::string older;
        const CheckpointStore store(o.model_dir, 1);
        if (auto valid = store.latest_valid(nullptr))
            older = "; the newest valid one is step " + std::to_string(valid->step) + " (--checkpoint " +
                    std::to_string(valid->step) + ")";
        throw UsageError("checkpoint " + info.dir +
                         " is damaged, as a restore would refuse it: " + params.error().message + older);
    }
    auto rows = worker::load_keyed_tables(info.dir, tensors, *keyed, o.ema);
    if (!rows && rows.error().code == ErrorCode::kNotFound) throw UsageError("--ema: " + rows.error().message);
    if (!rows) throw UsageError("checkpoint " + info.dir + " is damaged: " + rows.error().message);
    worker::KeyedExport keyed_model;
    if (!keyed->empty()) {
        keyed_model = worker::keyed_export_model(*model, params->values, *rows);
        if (keyed_model.model.parameter_count > kMaxOnnxFloats)
            throw UsageError(
                fmt::format("checkpoint {}: model {} with its keyed tables' rows has {} parameters ({:.1f} "
                            "GB as f32); an ONNX file holds at most 2 GiB and psrun export does not write "
                            "ONNX external data: serve the model from the checkpoint (psrun eval/predict "
                            "--raw-ids)",
                            info.dir, model->name, keyed_model.model.parameter_count,
                            double(keyed_model.model.parameter_count) * 4 / 1e9));
    }
    const nn::ModelDescription& exported = keyed->empty() ? *model : keyed_model.model;
    const std::vector<float>& values = keyed->empty() ? params->values : keyed_model.params;
    const std::string output =
        o.output.empty() ? o.model_dir + "/model-" + std::to_string(info.step) + (o.ema ? "-ema" : "") + ".onnx"
                         : o.output;
    std::vector<std::string> ids_files;
    for (const auto& name : worker::keyed_embedding_names(*model, *keyed))
        ids_files.push_back(worker::keyed_ids_path(output, name));
    // The run's recipe (<model-dir>/recipe.json, written by the chief) rides along as metadata.
    auto recipe = worker::read_run_recipe(o.model_dir);
    if (!recipe) throw UsageError(recipe.error().message + " (remove it to export without the recipe)");
    std::vector<std::pair<std::string, std::string>> metadata;
    if (*recipe) metadata.emplace_back(onnx_io::kRecipeKey, worker::recipe_document(**recipe));
    if (!keyed->empty())
        metadata.emplace_back(worker::kKeyedTablesKey, worker::keyed_export_metadata(*model, *rows, ids_files).dump());
    auto bytes = onnx_io::export_onnx(exported, values, metadata);
    if (!bytes) throw UsageError(bytes.error().message);
    for (std::size_t k = 0; k < ids_files.size(); ++k) {  // the id maps first: the graph is useless without them
        const std::string path = std::filesystem::absolute(ids_files[k]).string();
        if (auto written = write_file_atomically(path, worker::npy_u64_bytes((*rows)[k].ids())); !written)
            throw UsageError("-o " + output + ": the id map " + ids_files[k] + ": " + written.error().message);
    }
    if (auto written = write_file_atomically(output, *bytes); !written)
        throw UsageError("-o " + output + ": " + written.error().message);
    // The graph's inputs as export_onnx names them: a single-input image model's is "images".
    std::string inputs;
    for (const auto& in : model->inputs)
        inputs += (inputs.empty() ? "" : ", ") +
                  (model->multi_input() || !model->image_input() ? in.name : std::string("images")) + " [" +
                  nn::to_string(in.info.dims) + "]";
    std::cout << "wrote " << output << ": model " << worker::describe_model(exported) << " at step " << info.step
              << (o.ema ? " (moving average)" : "") << ", " << exported.parameter_count << " parameters, "
              << bytes->size() << " bytes (ONNX opset 13, input" << (model->multi_input() ? "s " : " ") << inputs
              << ", output "
              << (model->loss == nn::LossKind::kGraph
                      ? std::string("loss (a scalar)") + heads_text(*model)
                      : (model->loss == nn::LossKind::kMeanSquaredError ? "outputs" : "probabilities") +
                            std::string(" [N x ") + std::to_string(model->classes) + "]")
              << ")" << (*recipe ? std::string(", recipe in metadata ") + onnx_io::kRecipeKey : std::string())
              << std::endl;
    for (std::size_t k = 0; k < ids_files.size(); ++k)
        std::cout << "wrote " << ids_files[k] << ": the id map of keyed table " << (*rows)[k].table() << " ("
                  << (*rows)[k].rows() << " uint64 ids, ascending, in row order; an id not in it reads row "
                  << (*rows)[k].rows() << ", zeros; metadata " << worker::kKeyedTablesKey << ")" << std::endl;
}

}  // namespace

void add_export_command(CLI::App& app, int& exit_code) {
    auto options = std::make_shared<ExportOptions>();
    CLI::App* cmd = app.add_subcommand(
        "export", "write a checkpoint's model and parameters as an ONNX inference graph (docs/models.md)");
    cmd->add_option("--model-dir", options->model_dir, "the run's model dir (its ckpt-<step>/ checkpoints)")
        ->required();
    cmd->add_option("--checkpoint", options->checkpoint, "the step of the checkpoint to export (default: the newest)")
        ->check(integer_in(0, std::numeric_limits<std::int64_t>::max()));
    cmd->add_option(
        "-o,--output", options->output,
        "the ONNX file to write (default: <model-dir>/model-<step>.onnx, model-<step>-ema.onnx with --ema)");
    cmd->add_flag("--ema", options->ema,
                  "export the checkpoint's moving average of the weights (a run trained with --ema-decay)");
    cmd->callback([options, &exit_code] {
        run_export(*options);
        exit_code = kExitOk;
    });
}

}  // namespace psrun::launcher
