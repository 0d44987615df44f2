#include "launcher/model_source.h"

#include <filesystem>
#include <limits>
#include <optional>

#include "common/option_checks.h"
#include "common/result.h"
#include "workerd/train_options.h"

namespace psrun::launcher {

void add_model_source_options(CLI::App& cmd, ModelSourceOptions& o) {
    auto* dir = cmd.add_option("--model-dir", o.model_dir,
                               "a training run's model dir: the model and parameters of its newest checkpoint");
    auto* onnx = cmd.add_option("--onnx", o.onnx, "an ONNX file (psrun export, or PyTorch's) instead of --model-dir");
    dir->excludes(onnx);
    cmd.add_option("--checkpoint", o.checkpoint, "the checkpoint of this global step instead of the newest")
        ->check(integer_in(0, std::numeric_limits<std::int64_t>::max()));
    cmd.add_flag(
        "--ema", o.ema,
        "the checkpoint's moving average of the weights (a run trained with --ema-decay) instead of its weights");
    cmd.add_option("--batch-size", o.batch_size, "images per forward pass")
        ->check(integer_in(1, 100000))
        ->capture_default_str();
    cmd.add_option("--threads", o.threads, "compute threads (0: all cores)")->check(thread_count(0));
    cmd.add_option("--normalize", o.normalize,
                   "MEAN,STD or M1,M2,..:S1,S2,..: the --normalize the model was trained with (not recorded)");
    cmd.add_option("--raw-ids", o.raw_ids,
                   "the --raw-ids the model was trained with: these embeddings' tables are keyed by raw 64-bit ids in "
                   "the checkpoint, and their inputs are read as raw ids (an id that is not a row reads as its "
                   "initial values, as psd serves it)")
        ->delimiter(',');
}

void apply_normalization(const ModelSourceOptions& o, worker::LabeledImages& images) {
    auto parsed = worker::parse_normalization(o.normalize);
    if (!parsed) throw UsageError(parsed.error().message);
    const std::size_t pairs = parsed->mean.size(), channels = static_cast<std::size_t>(images.images.channels);
    if (pairs > 1 && pairs != channels)
        throw UsageError("--normalize gives " + std::to_string(pairs) + " mean/std pairs for images of " +
                         std::to_string(channels) + " channels (give 1 pair or " + std::to_string(channels) + ")");
    images.normalization = std::move(*parsed);
}

worker::InferenceModel load_model_source(const ModelSourceOptions& o) {
    if (o.model_dir.empty() == o.onnx.empty())
        throw UsageError("give the model: --model-dir D (a training run's model dir) or --onnx FILE");
    if (!o.onnx.empty() && o.checkpoint >= 0)
        throw UsageError("--checkpoint picks a checkpoint of a --model-dir; an ONNX file holds one set of parameters");
    if (!o.onnx.empty() && o.ema)
        throw UsageError(
            "--ema reads the moving average a --model-dir's checkpoint holds; an ONNX file holds one set "
            "of parameters (export it with psrun export --ema)");
    if (!o.onnx.empty() && !o.raw_ids.empty())
        throw UsageError(
            "--raw-ids reads the tables a --model-dir's checkpoint holds keyed by raw ids; an ONNX file "
            "(psrun export) holds each such table by row, with its id map beside it (F.<embedding>.ids.npy): "
            "give the rows of the ids instead (docs/sparse.md \"Raw ids\"), or use --model-dir");
    worker::set_compute_threads(o.threads);
    auto loaded = o.onnx.empty()
                      ? worker::load_checkpoint_model(
                            o.model_dir, o.checkpoint >= 0 ? std::optional<std::int64_t>(o.checkpoint) : std::nullopt,
                            o.ema ? CheckpointValues::kAverage : CheckpointValues::kParameters, o.raw_ids)
                      : worker::load_onnx_model(o.onnx);
    if (!loaded) throw UsageError(loaded.error().message);
    return std::move(*loaded);
}

std::string default_output_dir(const ModelSourceOptions& o) {
    if (!o.model_dir.empty()) return o.model_dir;
    const auto parent = std::filesystem::path(o.onnx).parent_path();
    return parent.empty() ? "." : parent.string();
}

}  // namespace psrun::launcher
