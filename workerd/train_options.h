// Training options shared by `workerd --standalone` and the distributed worker (see the workerd
// command line in docs/architecture.md), and their translation into a TrainerConfig.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "workerd/data/dataset_fetch.h"
#include "workerd/trainer.h"

namespace psrun::worker {

struct TrainOptions {
    // --model: a built-in name, a JSON file (docs/models.md) or an ONNX file; resolve_model()
    // loads it (onnx_io::load_any_model).
    std::string model = "mnist_deep";
    // --recipe F: a recipe file (nn::parse_recipe_text: {"recipe": {...}} or the bare object);
    // resolve_model() merges it between the command line and the model's recipe.
    std::string recipe_file;
    // --init: "model" starts from the model's initial_parameters when it brings them (an ONNX
    // file's initializers), "description" always draws from the layers' initializers.
    std::string init = "model";
    bool model_given = false;  // --model was on the command line (resolve_model sets it)
    std::shared_ptr<const nn::ModelDescription> description;
    std::string data_dir;  // empty: default_data_dir(dataset)
    // Data given as files instead of a data dir (docs/data.md): IDX or .npy by content, or
    // "cifar10:F1,F2" / "cifar100:F" images with no labels file. All empty: --data-dir.
    std::string train_images;
    std::string train_labels;
    std::string test_images;
    std::string test_labels;
    // --train-input/--test-input NAME=FILE.npy (repeated): the model's inputs after the first,
    // one .npy each, one row per example (workerd/input_columns.h).
    std::vector<std::string> train_inputs;
    std::vector<std::string> test_inputs;
    // --train-data/--train-dir, --test-data/--test-dir (docs/data.md): an image folder, TFRecord
    // files (comma list, globs), a CSV or .npz table; and how they are read
    // (workerd/data/data_options.h).
    std::string train_data;
    std::string test_data;
    double validation_split = 0;
    std::string inputs;   // --inputs: Example keys, CSV columns or .npz arrays (comma list)
    std::string targets;  // --targets
    // --input-columns NAME=COL[,COL...] (repeated), --value-separator C, --bag-weights W=BAG[:sum|mean]
    // (repeated), --column-names, --delimiter: a CSV/TSV table feeding the model's inputs by column
    // (workerd/data/column_spec.h).
    std::vector<std::string> input_columns;
    std::string value_separator;
    std::vector<std::string> bag_weights;
    std::string column_names;  // --column-names A,B,...: the tables have no header line
    std::string delimiter;     // --delimiter comma|tab|C
    std::string image_resize = "crop";
    std::string corrupt_records = "error";
    std::string stream = "auto";
    std::int64_t shuffle_buffer = 10000;
    int prefetch = 4;
    int data_threads = 0;
    std::int64_t stream_memory_mb = 2048;
    std::string normalize;              // "MEAN,STD" or "M1,M2,..:S1,S2,..", empty: none
    std::string image_layout = "auto";  // rank-4 .npy images: auto, nchw or nhwc
    std::string dataset = "mnist";
    std::string model_dir;  // empty: no summary.json
    int batch_size = 50;
    // --global-batch-size G: the examples of one global step, split evenly over the workers
    // (G / --num-workers each, as tf4slurm's MNIST-04: 60 over 3 workers); 0: not given.
    int global_batch_size = 0;
    // --accumulate-steps N (1..kMaxAccumulateSteps): each update (a push to psd, or a standalone
    // local update) sums the gradients of N micro-batches of batch_size examples, as a mean when the
    // loss is a mean (TrainerConfig::accumulate_steps). batch_size stays the micro-batch (what the
    // network runs at once, as in PyTorch/Keras accumulation); --steps, the schedule and
    // checkpoints count updates. With --global-batch-size G the micro-batch is G / (workers x N).
    int accumulate_steps = 1;
    std::int64_t steps = 20000;
    float learning_rate = 1e-4f;
    // Exponential decay of the learning rate (TF 1.x's exponential_decay): x decay_rate every
    // decay_steps updates, continuously. decay_steps 0: constant.
    float lr_decay_rate = 1.0f;
    std::int64_t lr_decay_steps = 0;
    std::string lr_schedule;           // --lr-schedule (common/lr_schedule.h); empty: constant
    std::int64_t lr_warmup_steps = 0;  // --lr-warmup-steps; 0: as --lr-schedule says
    std::string optimizer = "adam";
    // --weight-decay W (OptimizerConfig::weight_decay; 0: none), on the tensors --weight-decay-on
    // selects ("matrices": rank >= 2; "all"), and --clip-global-norm C (0: off).
    float weight_decay = 0.0f;
    std::string weight_decay_on = "matrices";
    float clip_global_norm = 0.0f;
    // --momentum (momentum, nesterov), --beta1, --beta2, --epsilon (adam, adam_torch, adamw, lamb):
    // empty keeps OptimizerConfig's default; make_trainer_config refuses one the optimizer
    // does not read (common/optimizer.h uses_momentum, uses_betas).
    std::optional<float> momentum, beta1, beta2, epsilon;
    // --label-smoothing E (nn::NetworkOptions::label_smoothing): softmax cross-entropy only.
    float label_smoothing = 0.0f;
    std::uint64_t seed = 1;
    int threads = 0;              // 0: OpenMP's default (all cores)
    std::int64_t eval_every = 0;  // 0: evaluate only at the end
    // --target-accuracy "A,B": the test accuracies whose time the end-of-run summary reports
    // (common/metric_targets.h); empty: the dataset's customary ones (MNIST: 99.0%, 99.2%), else
    // the best accuracy reached and within one point of it.
    std::string target_accuracy;
    std::int64_t log_every = 100;
    std::string precision = "f32";
    std::string shard = "0/1";
    // Distributed mode, chief only (common/checkpointer.h): coordinated checkpoints of every
    // psd shard into <model-dir>/ckpt-<step>, and restore from the newest valid one at start.
    double checkpoint_secs = 600;       // <= 0: never by time
    std::int64_t checkpoint_steps = 0;  // 0: never by steps
    int keep_checkpoints = 5;
    // Distributed async mode: exchange step k's gradient with psd while step k+1 computes
    // (workerd/step_loop.h). "on" or "off" (default: measured not to pay on a shared 2-core
    // host, docs/benchmarks.md); sync mode always blocks.
    std::string overlap = "off";
    // Distributed mode: exchange gradients and parameters with the psd shards on this host through
    // shared memory (common/shm_segment.h); shards elsewhere use the socket either way. "on" or "off".
    std::string shared_memory = "on";
    // Distributed mode: precision of the gradients and parameters in the payload frames exchanged
    // with psd (docs/wire-precision.md): "f32", or "bf16" (half the bytes, rounded to nearest even;
    // psd keeps f32 master weights and optimizer state). Shared-memory shards stay f32.
    std::string wire_precision = "f32";
    // Distributed mode: embeddings whose tables live on psd only, row-sharded, pulled and pushed
    // row by row (--sparse-embedding NODE|TABLE; workerd/sparse_tables.h).
    std::vector<std::string> sparse_embeddings;
    // Distributed mode: sparse embeddings keyed by raw 64-bit ids instead of row ids (--raw-ids
    // NODE|TABLE; docs/sparse.md "Raw ids"): their input's values are any uint64, the table's
    // vocabulary is its capacity, and psd admits and evicts rows by this policy.
    std::vector<std::string> raw_ids;
    std::uint32_t admit_after = 1;   // --admit-after N: pulls before an id becomes a row
    double admit_probability = 1.0;  // --admit-probability P: then the chance per pull
    std::uint64_t evict_after = 0;   // --evict-after T: updates without a push before a row goes; 0: never
    // Training-image augmentation (workerd/augment.h): "none", or "flip", "crop=P" joined by commas.
    std::string augment = "none";
    // The hand-written kernels of the engine (nn::NetworkOptions::hand_kernels): "on"
    // (where a layer pattern matches one and the CPU allows) or "off" (oneDNN primitives only).
    std::string hand_kernels = "on";
    // Scale tests only (docs/scaling.md): each step sleeps this long instead of forward/backward and
    // produces a gradient of the model's real size and shape (every element 1e-7), so that many
    // workers fit on a few cores while the exchange with psd is real. 0: off. Trains nothing, so
    // it refuses --model-dir (no checkpoint of a real run is touched).
    double synthetic_compute_ms = 0;
    // --synthetic-compute-jitter: "none" or "exp:MEAN_MS", an exponential extra delay per step
    // (workerd/synthetic_compute.h); needs --synthetic-compute-ms.
    std::string synthetic_compute_jitter = "none";
    // --ema-decay D (OptimizerConfig::ema_decay): psd keeps a moving average of the weights in
    // checkpoints (psd/weight_average.h); 0: off. Distributed mode only.
    float ema_decay = 0.0f;
    // --param-group PATTERN:lr_mult=M,weight_decay=W, repeatable (common/param_groups.h): the
    // tensors matching PATTERN get learning rate x M and decay W; the first match wins.
    std::vector<std::string> param_groups;
};

inline constexpr int kMaxAccumulateSteps = 4096;

// Examples one worker trains on per update: batch_size x accumulate_steps.
inline std::int64_t examples_per_update(const TrainOptions& options) {
    return std::int64_t{options.batch_size} * options.accumulate_steps;
}

// Registers --data-dir ... --precision (and --shard) on `app`, bound to `options`.
void add_train_options(CLI::App& app, TrainOptions& options);

// After parsing: loads --model into options.description (UsageError naming the model and the
// field otherwise), reads --recipe (UsageError naming the file and the field), and merges the
// recipes field by field: the command line of `app` wins over the --recipe file, which wins
// over the model's recipe (merge_recipe applied to each). A recipe's momentum, betas and
// epsilon are then dropped where the resulting optimizer does not read them.
void resolve_model(const CLI::App& app, TrainOptions& options);

// Fills from `recipe` every option whose flag `given` does not name (given: the flag was set by
// a higher layer, e.g. the command line). Two groups go as one: the schedule (--lr-schedule,
// --lr-decay-rate, --lr-decay-steps: a layer giving any of them decides all) and the batch
// (--batch-size, --global-batch-size); a recipe's lr_warmup_steps gives way to a warm-up the
// schedule in effect already carries (warmup=N).
void merge_recipe(const nn::Recipe& recipe, TrainOptions& options,
                  const std::function<bool(std::string_view flag)>& given);
// Whether `recipe` sets what `flag` sets ("--lr-decay-rate" and "--lr-decay-steps": lr_decay).
bool recipe_gives(const nn::Recipe& recipe, std::string_view flag);

// --global-batch-size G (or a recipe's global_batch_size, when the command line gave neither
// --batch-size nor --global-batch-size) over `workers` (1 standalone): sets batch_size = G /
// (workers x accumulate_steps). UsageError when G does not split evenly or --batch-size was
// given too.
void apply_global_batch_size(const CLI::App& app, TrainOptions& options, std::uint32_t workers);

// Validates the options (UsageError naming the flag otherwise) and builds the trainer config.
// REQUIRES: resolve_model() ran (else it loads --model itself, without the recipe).
TrainerConfig make_trainer_config(const TrainOptions& options);

// "f32" or "bf16"; kInvalidArgument otherwise, and kUnsupported for bf16 on a CPU without it.
[[nodiscard]] Result<nn::Precision> parse_precision(const std::string& name);

// summary.json's record of the optimizer beyond its name and rate: optimizer_form (which
// reference's update rule: "tf1 epsilon-hat", "torch", ...), weight_decay, weight_decay_on,
// clip_global_norm, and the hyperparameters the kind reads: momentum (momentum, nesterov);
// beta1, beta2, epsilon (the Adam forms).
nlohmann::json optimizer_summary(const OptimizerConfig& optimizer);

// The thresholds --target-accuracy gives (fractions, easiest first; empty when not given).
// UsageError naming the option on a bad value.
std::vector<double> given_target_accuracy(const TrainOptions& options);

// What the run trains on, as summary.json records it: "files" with --train-images or
// --train-data/--train-dir, else --dataset.
std::string dataset_name(const TrainOptions& options);

// The data dir to read: --data-dir or the dataset's default.
std::string resolved_data_dir(const TrainOptions& options);

// Sets the OpenMP thread count used by oneDNN (threads > 0), before any primitive runs.
void set_compute_threads(int threads);

}  // namespace psrun::worker
