// workerd's training flags (train_options.h): their CLI11 definitions, each with its range. The
// recipe merge and the model: train_options_recipe.cpp; the trainer's configuration from the
// flags: train_options_config.cpp.
#include "workerd/train_options.h"

#include "workerd/augment.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "common/metric_targets.h"
#include "common/option_checks.h"
#include "common/param_groups.h"

namespace psrun::worker {

namespace {
constexpr std::int64_t kMaxSteps = 1000000000000;  // 1e12: any step count or interval
// A recipe's ranges are its flags' (workerd/nn/recipe.h keeps its own copies: no dependency on workerd).
static_assert(nn::kMaxRecipeSteps == kMaxSteps && nn::kMaxRecipeAccumulateSteps == kMaxAccumulateSteps &&
              nn::kMaxRecipeGlobalBatch == 65536 * kMaxTasks);
}  // namespace

void add_train_options(CLI::App& app, TrainOptions& o) {
    app.add_option("--model", o.model,
                   "the network: a built-in name (psrun model list), a model file (docs/models.md) or an ONNX "
                   "file FILE.onnx (imported; docs/models.md \"Importing from PyTorch\"); its recipe fills the "
                   "options not given here")
        ->capture_default_str();
    app.add_option("--recipe", o.recipe_file,
                   "a recipe file FILE.json ({\"recipe\": {...}} or the bare object, as a model's \"recipe\"; a run's "
                   "<model-dir>/recipe.json): its fields fill the options not given here and win over the model's "
                   "recipe (docs/models.md \"Recipe\")");
    app.add_option("--init", o.init,
                   "initial weights: model (the ONNX file's initializers when --model is one, else the "
                   "description's initializers) or description (always draw from the description's initializers "
                   "with --seed)")
        ->check(CLI::IsMember({"model", "description"}))
        ->capture_default_str();
    app.add_option("--data-dir", o.data_dir,
                   "directory with the IDX files (default: ${XDG_CACHE_HOME:-$HOME/.cache}"
                   "/psrun/data/<dataset>, filled by `psrun data fetch`)");
    app.add_option("--dataset", o.dataset, "mnist or fashion-mnist")->capture_default_str();
    app.add_option("--train-images", o.train_images,
                   "training images: an IDX or .npy file (N,H,W / N,C,H,W / N,H,W,C; uint8 or float32), or "
                   "cifar10:F1,F2,... / cifar100:F / cifar100-coarse:F batches (see docs/data.md)");
    app.add_option("--train-labels", o.train_labels, "training labels: an IDX or .npy file (uint8, int32 or int64)");
    app.add_option("--test-images", o.test_images, "test images, as --train-images");
    app.add_option("--test-labels", o.test_labels, "test labels, as --train-labels");
    app.add_option("--train-input", o.train_inputs,
                   "NAME=FILE.npy: a model with several inputs reads its input NAME (one after the first) from "
                   "FILE.npy, one row per training example in the labels' order; repeat per input")
        ->expected(1)
        ->take_all();
    app.add_option("--test-input", o.test_inputs, "NAME=FILE.npy for the test split, as --train-input")
        ->expected(1)
        ->take_all();
    app.add_option("--train-data,--train-dir", o.train_data,
                   "training data (docs/data.md): an image folder (one subfolder per class), TFRecord files "
                   "(comma list, globs), or a CSV or .npz table");
    app.add_option("--test-data,--test-dir", o.test_data, "test data, as --train-data");
    app.add_option("--validation-split", o.validation_split,
                   "an image folder without --test-data: hold this fraction out as the test split (by a hash of "
                   "each file's path)")
        ->check(psrun::number_in(0, 0.99));
    app.add_option("--inputs", o.inputs,
                   "input features by name: TFRecord feature keys (default image/encoded), CSV columns (default: all "
                   "but the targets), .npz array (default x)");
    app.add_option("--targets", o.targets,
                   "target features by name: TFRecord keys (default image/class/label), CSV columns (default "
                   "label), .npz array (default y)");
    app.add_option("--input-columns", o.input_columns,
                   "NAME=COL[,COL...]: a CSV/TSV --train-data/--test-data table feeds the model input NAME from these "
                   "columns (float inputs: numbers; int inputs: categorical values hashed into the rows of the "
                   "embedding that reads them); repeat per input; TFRecord files of tf.train.Example: feature names "
                   "instead of columns (docs/data.md, Recommender tables)")
        ->expected(1)
        ->take_all();
    app.add_option("--value-separator", o.value_separator,
                   "with --input-columns: the cells of int inputs hold several values separated by this character "
                   "(multi-valued fields, e.g. '|'); each column fills width/columns slots, padded or truncated");
    app.add_option("--bag-weights", o.bag_weights,
                   "WEIGHTS=BAG[:sum|mean|weighted]: with --input-columns, the float input WEIGHTS gets per slot of "
                   "the int input BAG 1 (sum), 1/n (mean) or the cell's own VALUE:WEIGHT (weighted) for a value and "
                   "0 for padding; repeat per bag")
        ->expected(1)
        ->take_all();
    app.add_option("--column-names", o.column_names,
                   "A,B,...: with --input-columns, the tables have no header line (as Criteo's files): these name "
                   "their columns, one per field");
    app.add_option("--delimiter", o.delimiter,
                   "with --input-columns: the tables' field delimiter, comma, tab or one character (default: a tab "
                   "for .tsv, else a comma)");
    app.add_option("--image-resize", o.image_resize,
                   "images not of the model's size: crop (scale to cover, cut the centre), pad (scale to fit, "
                   "black borders) or stretch")
        ->capture_default_str();
    app.add_option("--corrupt-records", o.corrupt_records,
                   "a TFRecord record with a bad CRC, or a record or image that does not decode: error (exit 2 "
                   "naming it) or skip (counted)")
        ->capture_default_str();
    app.add_option("--stream", o.stream,
                   "auto (TFRecord files and image folders larger than --stream-memory-mb are streamed), on or off "
                   "(load into memory)")
        ->capture_default_str();
    app.add_option("--shuffle-buffer", o.shuffle_buffer, "examples in a TFRecord stream's shuffle buffer")
        ->check(psrun::integer_in(0, 100000000))
        ->capture_default_str();
    app.add_option("--prefetch", o.prefetch, "batches a stream keeps ready")
        ->capture_default_str()
        ->check(psrun::integer_in(1, 4096));
    app.add_option("--data-threads", o.data_threads, "threads decoding a stream (0: a quarter of the cores)")
        ->check(psrun::thread_count(0))
        ->capture_default_str();
    app.add_option("--stream-memory-mb", o.stream_memory_mb,
                   "--stream auto: image folders whose decoded images exceed this are streamed")
        ->check(psrun::integer_in(1, 1000000000))
        ->capture_default_str();
    app.add_option("--normalize", o.normalize,
                   "per-channel (x - mean) / std after uint8 pixels are scaled to [0, 1]: MEAN,STD for every "
                   "channel or M1,M2,M3:S1,S2,S3 per channel");
    app.add_option("--image-layout", o.image_layout,
                   "axis order of rank-4 .npy images: nchw, nhwc or auto (the axis of size <= 4 is the channel)")
        ->capture_default_str();
    app.add_option("--model-dir", o.model_dir, "where summary.json is written");
    app.add_option("--batch-size", o.batch_size, "examples per step")
        ->capture_default_str()
        ->check(psrun::integer_in(1, 65536));
    app.add_option("--global-batch-size", o.global_batch_size,
                   "examples per global step, split evenly over the workers (G / --num-workers each; "
                   "instead of --batch-size)")
        ->check(psrun::integer_in(1, 65536 * kMaxTasks));
    app.add_option("--accumulate-steps", o.accumulate_steps,
                   "micro-batches of --batch-size whose mean gradient makes one update (gradient accumulation; "
                   "--steps counts updates)")
        ->check(psrun::integer_in(1, kMaxAccumulateSteps))
        ->capture_default_str();
    app.add_option("--steps", o.steps, "global steps to train")
        ->capture_default_str()
        ->check(psrun::integer_in(0, kMaxSteps));
    app.add_option("--learning-rate", o.learning_rate, "optimizer learning rate")
        ->check(psrun::number_above(0, 1e6))
        ->capture_default_str();
    app.add_option("--lr-decay-rate", o.lr_decay_rate,
                   "multiply the learning rate by this every --lr-decay-steps updates, continuously (0 < r <= 1)")
        ->check(psrun::number_above(0, 1))
        ->capture_default_str();
    app.add_option("--lr-decay-steps", o.lr_decay_steps, "updates per --lr-decay-rate factor (0: constant rate)")
        ->check(psrun::integer_in(0, kMaxSteps))
        ->capture_default_str();
    app.add_option("--lr-schedule", o.lr_schedule,
                   "constant | exponential:rate=R,steps=N | piecewise:boundaries=B1,..;values=V0,V1,.. | "
                   "cosine:steps=N[,alpha=A] | onecycle:total=N[,pct=P,div=D,final_div=F] (docs/running.md)");
    app.add_option("--lr-warmup-steps", o.lr_warmup_steps, "linear warm-up over the first N updates (0: none)")
        ->check(psrun::integer_in(0, kMaxSteps))
        ->capture_default_str();
    app.add_option("--optimizer", o.optimizer,
                   "sgd, momentum, nesterov, adagrad, adam (TF 1.x's epsilon-hat form), adam_torch (torch.optim.Adam), "
                   "adamw (torch.optim.AdamW) or lamb (LAMB: Adam with a per-tensor trust ratio)")
        ->capture_default_str();
    app.add_option("--weight-decay", o.weight_decay,
                   "L2 weight decay (g += W p; decoupled p *= 1 - lr W with adamw; lamb adds W p to its direction) "
                   "on --weight-decay-on's tensors")
        ->check(psrun::number_in(0, 1e6))
        ->capture_default_str();
    app.add_option("--weight-decay-on", o.weight_decay_on,
                   "matrices (tensors of rank >= 2: no biases or normalization scales) or all trainable tensors")
        ->capture_default_str();
    app.add_option("--clip-global-norm", o.clip_global_norm,
                   "scale each worker's gradient by min(1, C / ||g||) before sending it (0: off)")
        ->check(psrun::number_in(0, 1e30))
        ->capture_default_str();
    app.add_option("--momentum", o.momentum, "momentum and nesterov: the momentum factor, in [0, 1) (default 0.9)")
        ->check(psrun::number_in(0, 1));
    app.add_option("--beta1", o.beta1,
                   "adam, adam_torch, adamw, lamb: the first moment's decay, in [0, 1) (default 0.9)")
        ->check(psrun::number_in(0, 1));
    app.add_option("--beta2", o.beta2,
                   "adam, adam_torch, adamw, lamb: the second moment's decay, in [0, 1) (default 0.999)")
        ->check(psrun::number_in(0, 1));
    app.add_option("--epsilon", o.epsilon,
                   "adam, adam_torch, adamw, lamb: the denominator's epsilon, > 0 (default 1e-8)")
        ->check(psrun::number_in(0, 1e30));
    app.add_option("--label-smoothing", o.label_smoothing,
                   "softmax cross-entropy: train against (1 - E) one-hot + E / classes, 0 <= E < 1 (0: off)")
        ->check(psrun::number_in(0, 1))
        ->capture_default_str();
    app.add_option("--param-group", o.param_groups,
                   "PATTERN:lr_mult=M,weight_decay=W: tensors whose name matches the glob PATTERN train with learning "
                   "rate x M and weight decay W (either may be left out); repeat for more groups, the first match wins")
        ->take_all();
    app.add_option("--ema-decay", o.ema_decay,
                   "psd keeps a moving average of the weights with this decay, in [0, 1), for eval/predict/export "
                   "--ema (0: off)")
        ->check(psrun::number_in(0, 1))
        ->capture_default_str();
    app.add_option("--seed", o.seed, "seed for weights, shuffling and dropout")
        ->check(psrun::integer_in(0, std::numeric_limits<std::int64_t>::max()))
        ->capture_default_str();
    app.add_option("--threads", o.threads, "compute threads (0: all cores)")
        ->capture_default_str()
        ->check(psrun::thread_count(0));
    app.add_option("--eval-every", o.eval_every, "evaluate on the test set every N steps (0: at the end)")
        ->check(psrun::integer_in(0, kMaxSteps))
        ->capture_default_str();
    app.add_option("--log-every", o.log_every, "progress line every N steps")
        ->capture_default_str()
        ->check(psrun::integer_in(1, kMaxSteps));
    app.add_option("--target-accuracy", o.target_accuracy,
                   "test accuracies whose time the end-of-run summary reports, e.g. 99,99.2 or 0.9,0.92 (default: "
                   "99.0,99.2 on mnist; elsewhere the best accuracy reached and within 1 point of it)");
    app.add_option("--checkpoint-secs", o.checkpoint_secs,
                   "chief with psd: checkpoint every S seconds (0: never by time; always at the last step)")
        ->check(psrun::seconds_at_least(0))
        ->capture_default_str();
    app.add_option("--checkpoint-steps", o.checkpoint_steps, "chief with psd: checkpoint every N global steps (0: off)")
        ->check(psrun::integer_in(0, kMaxSteps))
        ->capture_default_str();
    app.add_option("--keep-checkpoints", o.keep_checkpoints, "checkpoints kept in --model-dir")
        ->capture_default_str()
        ->check(psrun::integer_in(1, 1000000));
    app.add_option("--precision", o.precision, "f32 or bf16 (bf16 compute, f32 master weights)")->capture_default_str();
    app.add_option("--overlap", o.overlap,
                   "async mode with psd: send each gradient while the next one computes (on|off)")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    app.add_option("--shared-memory", o.shared_memory,
                   "with psd on this host: gradients and parameters through shared memory, not the socket (on|off)")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    app.add_option("--wire-precision", o.wire_precision,
                   "with psd: gradients and parameters on the wire as f32 or bf16 (half the bytes; psd keeps "
                   "f32 master weights; shared memory stays f32)")
        ->check(CLI::IsMember({"f32", "bf16"}))
        ->capture_default_str();
    app.add_option("--augment", o.augment,
                   "training images: flip (left-right, p = 1/2) and/or crop=P (a random shift in [-P, P], zeros in), "
                   "e.g. flip,crop=4 as CIFAR recipes; seeded per worker")
        ->capture_default_str();
    app.add_option("--sparse-embedding", o.sparse_embeddings,
                   "with psd: this embedding's table (node or table name) lives on psd only, row-sharded; each step "
                   "pulls and pushes only its batch's rows (repeat it, or a,b, for several tables)")
        ->delimiter(',');
    app.add_option("--raw-ids", o.raw_ids,
                   "with psd: these embeddings (node or table names; sparse tables then) are keyed by raw 64-bit ids "
                   "instead of row ids: their input holds any integers (e.g. an int64 .npy of hashed ids), and the "
                   "table's vocabulary is the most rows it keeps (psd admits and evicts rows, --admit-after, "
                   "--admit-probability, --evict-after)")
        ->delimiter(',');
    app.add_option("--admit-after", o.admit_after,
                   "--raw-ids: an id becomes a row of its table at its N-th pull (counted per shard; before, it reads "
                   "as its initial values and its gradients are dropped)")
        ->check(psrun::integer_in(1, 65535))
        ->capture_default_str();
    app.add_option("--admit-probability", o.admit_probability,
                   "--raw-ids: once counted enough, an id becomes a row with this probability per pull")
        ->check(psrun::number_above(0.0, 1.0))
        ->capture_default_str();
    app.add_option("--evict-after", o.evict_after,
                   "--raw-ids: a row not pushed for this many updates of its shard is evicted (0: never; a full table "
                   "evicts its least recently updated row either way)")
        ->check(psrun::integer_in(0, static_cast<std::int64_t>(psrun::kMaxEvictAfter)))
        ->capture_default_str();
    app.add_option(
           "--hand-kernels", o.hand_kernels,
           "hand-written kernels (AVX-512 or AVX2 + FMA) where a layer pattern matches one and the CPU allows (on), "
           "or oneDNN primitives only (off)")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    app.add_option("--synthetic-compute-ms", o.synthetic_compute_ms,
                   "scale tests only: sleep this long per step instead of computing, push a gradient of the "
                   "model's size (trains nothing; refuses --model-dir)")
        ->check(psrun::number_in(0, 3.6e6, "milliseconds"))
        ->capture_default_str();
    app.add_option("--synthetic-compute-jitter", o.synthetic_compute_jitter,
                   "with --synthetic-compute-ms: none, or exp:MEAN_MS (each step sleeps an extra exponential "
                   "delay of mean MEAN_MS, seeded by --seed and the worker index)")
        ->capture_default_str();
    app.add_option("--shard", o.shard, "this worker's shard i/n of the training set")->capture_default_str();
}

}  // namespace psrun::worker
