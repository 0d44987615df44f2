#include "workerd/train_options.h"

#include "workerd/augment.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "common/metric_targets.h"
#include "common/option_checks.h"
#include "common/param_groups.h"
#include "workerd/parameter_set.h"
#include "workerd/onnx/model_loader.h"
#include "workerd/run_recipe.h"

namespace psrun::worker {

namespace {
constexpr std::int64_t kMaxSteps = 1000000000000;  // 1e12: any step count or interval
// A recipe's ranges are its flags' (workerd/nn/recipe.h keeps its own copies: no dependency on workerd).
static_assert(nn::kMaxRecipeSteps == kMaxSteps && nn::kMaxRecipeAccumulateSteps == kMaxAccumulateSteps &&
              nn::kMaxRecipeGlobalBatch == 65536 * kMaxTasks);

// --momentum, --beta1, --beta2, --epsilon into `config` (whose kind is set), validated.
void set_hyperparameters(const TrainOptions& o, OptimizerConfig& config) {
    const std::string name(to_string(config.kind));
    auto check = [&](const std::optional<float>& value, const char* flag, bool used, bool ok, const char* range,
                     const char* users) {
        if (!value) return;
        if (!used) throw UsageError(std::string(flag) + " applies to --optimizer " + users + ", not " + name);
        if (!std::isfinite(*value) || !ok) throw UsageError(std::string(flag) + " must be " + range);
    };
    const bool momentum = uses_momentum(config.kind), betas = uses_betas(config.kind);
    const char* adams = "adam, adam_torch, adamw and lamb";
    check(o.momentum, "--momentum", momentum, o.momentum && *o.momentum >= 0.0f && *o.momentum < 1.0f,
          "a number in [0, 1)", "momentum and nesterov");
    check(o.beta1, "--beta1", betas, o.beta1 && *o.beta1 >= 0.0f && *o.beta1 < 1.0f, "a number in [0, 1)", adams);
    check(o.beta2, "--beta2", betas, o.beta2 && *o.beta2 >= 0.0f && *o.beta2 < 1.0f, "a number in [0, 1)", adams);
    check(o.epsilon, "--epsilon", betas, o.epsilon && *o.epsilon > 0.0f, "a finite number > 0", adams);
    config.momentum = o.momentum.value_or(config.momentum);
    config.beta1 = o.beta1.value_or(config.beta1);
    config.beta2 = o.beta2.value_or(config.beta2);
    config.epsilon = o.epsilon.value_or(config.epsilon);
}
// --param-group: parsed, each matching some tensor of the model, the first match winning.
void set_param_groups(const TrainOptions& o, const nn::ModelDescription& model, OptimizerConfig& c) {
    if (o.param_groups.size() > wire::kMaxParamGroups)
        throw UsageError("--param-group: at most " + std::to_string(wire::kMaxParamGroups) + " groups");
    const auto tensors = model_tensors(model);
    for (const auto& text : o.param_groups) {
        auto group = parse_param_group(text);
        if (!group) throw UsageError(group.error().message);
        std::string names;
        bool any = false;
        for (const auto& t : tensors) {
            any = any || group->matches(t.name);
            if (names.size() < 300) names += (names.empty() ? "" : ", ") + t.name;
        }
        if (!any)
            throw UsageError("--param-group '" + text + "': the pattern matches no tensor of model " + model.name + " (its tensors: " +
                  names + (names.size() >= 300 ? ", ...; psrun model show lists them all)" : ")"));
        const bool shrinks = c.kind == OptimizerKind::kSgd || c.kind == OptimizerKind::kMomentum ||
                             c.kind == OptimizerKind::kNesterov || c.kind == OptimizerKind::kAdamW;
        const double decay = group->sets_weight_decay ? group->weight_decay : c.weight_decay;
        if (shrinks && double(c.learning_rate) * group->lr_multiplier * decay >= 1.0)
            throw UsageError("--param-group '" + text + "': its learning rate times its weight decay must be < 1 with --optimizer " +
                  o.optimizer + " (each update would scale the weights by 1 - lr W <= 0)");
        c.groups.push_back(std::move(*group));
    }
}

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
    app.add_option("--prefetch", o.prefetch, "batches a stream keeps ready")->capture_default_str()
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
    app.add_option("--batch-size", o.batch_size, "examples per step")->capture_default_str()
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
    app.add_option("--steps", o.steps, "global steps to train")->capture_default_str()
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
    app.add_option("--beta1", o.beta1, "adam, adam_torch, adamw, lamb: the first moment's decay, in [0, 1) (default 0.9)")
        ->check(psrun::number_in(0, 1));
    app.add_option("--beta2", o.beta2, "adam, adam_torch, adamw, lamb: the second moment's decay, in [0, 1) (default 0.999)")
        ->check(psrun::number_in(0, 1));
    app.add_option("--epsilon", o.epsilon, "adam, adam_torch, adamw, lamb: the denominator's epsilon, > 0 (default 1e-8)")
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
    app.add_option("--threads", o.threads, "compute threads (0: all cores)")->capture_default_str()
        ->check(psrun::thread_count(0));
    app.add_option("--eval-every", o.eval_every, "evaluate on the test set every N steps (0: at the end)")
        ->check(psrun::integer_in(0, kMaxSteps))
        ->capture_default_str();
    app.add_option("--log-every", o.log_every, "progress line every N steps")->capture_default_str()
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
    app.add_option("--keep-checkpoints", o.keep_checkpoints, "checkpoints kept in --model-dir")->capture_default_str()
        ->check(psrun::integer_in(1, 1000000));
    app.add_option("--precision", o.precision, "f32 or bf16 (bf16 compute, f32 master weights)")
        ->capture_default_str();
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
    app.add_option("--hand-kernels", o.hand_kernels,
                   "hand-written AVX-512 kernels where a layer pattern matches one and the CPU allows (on), "
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
    app.add_option("--shard", o.shard, "this worker's shard i/n of the training set")
        ->capture_default_str();
}

Result<nn::Precision> parse_precision(const std::string& name) {
    if (name == "f32") return nn::Precision::kF32;
    if (name == "bf16") {
        if (!nn::engine_bf16_supported())
            return make_error(ErrorCode::kUnsupported,
                              "bf16 needs a CPU with AVX512-BF16 or AMX; this one has neither: use f32");
        return nn::Precision::kBf16;
    }
    return make_error(ErrorCode::kInvalidArgument, "unknown precision '" + name + "' (f32 or bf16)");
}

bool recipe_gives(const nn::Recipe& r, std::string_view flag) {
    const std::pair<std::string_view, bool> fields[] = {
        {"--optimizer", r.optimizer.has_value()},
        {"--learning-rate", r.learning_rate.has_value()},
        {"--lr-decay-rate", r.lr_decay_rate.has_value()},
        {"--lr-decay-steps", r.lr_decay_steps.has_value()},
        {"--lr-schedule", r.lr_schedule.has_value()},
        {"--lr-warmup-steps", r.lr_warmup_steps.has_value()},
        {"--batch-size", r.batch_size.has_value()},
        {"--global-batch-size", r.global_batch_size.has_value()},
        {"--accumulate-steps", r.accumulate_steps.has_value()},
        {"--steps", r.steps.has_value()},
        {"--weight-decay", r.weight_decay.has_value()},
        {"--weight-decay-on", r.weight_decay_on.has_value()},
        {"--clip-global-norm", r.clip_global_norm.has_value()},
        {"--momentum", r.momentum.has_value()},
        {"--beta1", r.beta1.has_value()},
        {"--beta2", r.beta2.has_value()},
        {"--epsilon", r.epsilon.has_value()},
        {"--label-smoothing", r.label_smoothing.has_value()},
        {"--param-group", r.param_groups.has_value()},
        {"--ema-decay", r.ema_decay.has_value()},
    };
    for (const auto& [name, set] : fields)
        if (name == flag) return set;
    return false;
}

void merge_recipe(const nn::Recipe& r, TrainOptions& o, const std::function<bool(std::string_view flag)>& given) {
    auto take = [&](const auto& from, auto& to, std::string_view flag) {
        if (!from || given(flag)) return;
        using To = std::decay_t<decltype(to)>;
        if constexpr (std::is_same_v<To, int>)  // a count beyond int (batch_size may be huge) is clamped, then refused
            to = static_cast<int>(std::clamp<std::int64_t>(*from, INT32_MIN, INT32_MAX));
        else if constexpr (std::is_same_v<To, float> || std::is_same_v<To, std::optional<float>>)
            to = static_cast<float>(*from);
        else
            to = *from;
    };
    take(r.optimizer, o.optimizer, "--optimizer");
    take(r.learning_rate, o.learning_rate, "--learning-rate");
    // The schedule is one choice: the highest layer that gives any part of it decides all of it.
    if ((r.lr_schedule || r.lr_decay_rate) && !given("--lr-schedule") && !given("--lr-decay-rate") &&
        !given("--lr-decay-steps")) {
        if (r.lr_schedule) o.lr_schedule = *r.lr_schedule;
        if (r.lr_decay_rate) {
            o.lr_decay_rate = static_cast<float>(*r.lr_decay_rate);
            o.lr_decay_steps = r.lr_decay_steps.value_or(0);
        }
    }
    // A warm-up the schedule in effect carries itself (a higher layer's warmup=N) wins.
    if (r.lr_warmup_steps && !given("--lr-warmup-steps")) {
        const auto schedule = o.lr_schedule.empty() ? Result<LrSchedule>(LrSchedule{}) : parse_lr_schedule(o.lr_schedule);
        if (!schedule || schedule->warmup_steps == 0 ||
            schedule->warmup_steps == static_cast<std::uint64_t>(*r.lr_warmup_steps))
            o.lr_warmup_steps = *r.lr_warmup_steps;
    }
    // The batch too: --batch-size or --global-batch-size; within one recipe global_batch_size decides
    // (apply_global_batch_size) and batch_size beside it is what it came to.
    if (!given("--batch-size") && !given("--global-batch-size")) {
        take(r.batch_size, o.batch_size, "--batch-size");
        take(r.global_batch_size, o.global_batch_size, "--global-batch-size");
    }
    take(r.accumulate_steps, o.accumulate_steps, "--accumulate-steps");
    take(r.steps, o.steps, "--steps");
    take(r.weight_decay, o.weight_decay, "--weight-decay");
    take(r.weight_decay_on, o.weight_decay_on, "--weight-decay-on");
    take(r.clip_global_norm, o.clip_global_norm, "--clip-global-norm");
    take(r.label_smoothing, o.label_smoothing, "--label-smoothing");
    take(r.param_groups, o.param_groups, "--param-group");
    take(r.ema_decay, o.ema_decay, "--ema-decay");
    take(r.momentum, o.momentum, "--momentum");
    take(r.beta1, o.beta1, "--beta1");
    take(r.beta2, o.beta2, "--beta2");
    take(r.epsilon, o.epsilon, "--epsilon");
}

void resolve_model(const CLI::App& app, TrainOptions& o) {
    auto loaded = onnx_io::load_any_model(o.model);
    if (!loaded) throw UsageError("--model " + o.model + ": " + loaded.error().message);
    if (o.init == "description") loaded->initial_parameters = nullptr;
    o.description = std::make_shared<const nn::ModelDescription>(std::move(*loaded));
    o.model_given = app.count("--model") > 0;
    std::optional<nn::Recipe> file;
    if (!o.recipe_file.empty()) {
        auto read = read_recipe_file(o.recipe_file, "--recipe " + o.recipe_file);
        if (!read) throw UsageError(read.error().message);
        file = std::move(*read);
    }
    auto on_command_line = [&app](std::string_view flag) { return app.count(std::string(flag)) > 0; };
    if (file) merge_recipe(*file, o, on_command_line);
    if (o.description->recipe)
        merge_recipe(*o.description->recipe, o, [&](std::string_view flag) {
            return on_command_line(flag) || (file && recipe_gives(*file, flag));
        });
    // A recipe's hyperparameters of its own optimizer: dropped when the optimizer in effect (the
    // command line's, say) does not read them. The command line's own stay, to be refused.
    if (const auto kind = parse_optimizer_kind(o.optimizer)) {
        auto drop = [&](std::optional<float>& value, const char* flag, bool used) {
            if (!used && !on_command_line(flag)) value.reset();
        };
        drop(o.momentum, "--momentum", uses_momentum(*kind));
        drop(o.beta1, "--beta1", uses_betas(*kind));
        drop(o.beta2, "--beta2", uses_betas(*kind));
        drop(o.epsilon, "--epsilon", uses_betas(*kind));
    }
}

void apply_global_batch_size(const CLI::App& app, TrainOptions& o, std::uint32_t workers) {
    // From a recipe (resolve_model merged it) when the command line gave neither batch flag.
    const bool flag = app.count("--global-batch-size") > 0;
    if (!flag && o.global_batch_size == 0) return;
    const std::string name = flag ? "--global-batch-size" : "the recipe's global_batch_size";
    const int g = o.global_batch_size;
    if (flag && app.count("--batch-size") > 0)
        throw UsageError("give --batch-size (per worker) or --global-batch-size (split over the workers), not both");
    if (g < 1) throw UsageError(name + " must be >= 1");
    if (workers == 0) throw UsageError(name + " needs --num-workers");
    const int parts = static_cast<int>(workers) * std::clamp(o.accumulate_steps, 1, kMaxAccumulateSteps);
    if (g % parts != 0)
        throw UsageError(name + " " + std::to_string(g) + " does not split evenly over " +
                         std::to_string(workers) + " workers" +
                         (parts > static_cast<int>(workers) ? " x --accumulate-steps " + std::to_string(o.accumulate_steps) : "") +
                         ": give a multiple of " + std::to_string(parts));
    o.batch_size = g / parts;
}

TrainerConfig make_trainer_config(const TrainOptions& o) {
    auto usage = [](const std::string& msg) { throw UsageError(msg); };
    if (o.batch_size < 1 || o.batch_size > 65536) usage("--batch-size must be in 1..65536");
    if (o.steps < 0) usage("--steps must be >= 0");
    if (o.accumulate_steps < 1 || o.accumulate_steps > kMaxAccumulateSteps)
        usage("--accumulate-steps must be in 1.." + std::to_string(kMaxAccumulateSteps) +
              " (micro-batches per update; 1: no accumulation)");
    if (o.threads < 0) usage("--threads must be >= 0");
    if (o.eval_every < 0) usage("--eval-every must be >= 0");
    if (o.log_every < 1) usage("--log-every must be >= 1");
    if (o.checkpoint_steps < 0) usage("--checkpoint-steps must be >= 0");
    if (o.keep_checkpoints < 1) usage("--keep-checkpoints must be >= 1");
    if (!(o.learning_rate > 0.0f)) usage("--learning-rate must be > 0");
    if (!(o.lr_decay_rate > 0.0f && o.lr_decay_rate <= 1.0f)) usage("--lr-decay-rate must be in (0, 1]");
    if (o.lr_decay_steps < 0) usage("--lr-decay-steps must be >= 0");
    if (auto d = parse_dataset_kind(o.dataset); !d) usage("--dataset: " + d.error().message);
    given_target_accuracy(o);  // throws UsageError on a bad value
    if (!(o.synthetic_compute_ms >= 0 && o.synthetic_compute_ms <= 3.6e6))
        usage("--synthetic-compute-ms must be in 0..3600000");
    auto jitter = parse_compute_jitter(o.synthetic_compute_jitter);
    if (!jitter) usage("--synthetic-compute-jitter: " + jitter.error().message);
    if (jitter->enabled() && o.synthetic_compute_ms == 0)
        usage("--synthetic-compute-jitter needs --synthetic-compute-ms (it only adds to synthetic compute)");
    TrainerConfig c;
    c.synthetic_compute_ms = o.synthetic_compute_ms;
    c.synthetic_jitter = *jitter;
    if (o.description) {
        c.model = o.description;
    } else {
        auto loaded = onnx_io::load_any_model(o.model);
        if (!loaded) usage("--model " + o.model + ": " + loaded.error().message);
        if (o.init == "description") loaded->initial_parameters = nullptr;
        c.model = std::make_shared<const nn::ModelDescription>(std::move(*loaded));
    }
    if (c.model->column_inputs() && !o.augment.empty() && o.augment != "none")
        usage("--augment: model " + c.model->name + " has several inputs; augmentation of the primary input "
              "alone is not supported with them (drop --augment)");
    c.network.batch_size = o.batch_size;
    c.accumulate_steps = o.accumulate_steps;
    auto precision = parse_precision(o.precision);
    if (!precision) usage("--precision: " + precision.error().message);
    c.network.precision = *precision;
    if (o.hand_kernels != "on" && o.hand_kernels != "off") usage("--hand-kernels must be on or off");
    c.network.hand_kernels = o.hand_kernels == "on";
    auto kind = parse_optimizer_kind(o.optimizer);
    if (!kind) usage("--optimizer: " + kind.error().message);
    c.optimizer.kind = *kind;
    c.optimizer.learning_rate = o.learning_rate;
    c.optimizer.decay_rate = o.lr_decay_rate;
    c.optimizer.decay_steps = static_cast<std::uint64_t>(o.lr_decay_steps);
    auto schedule = lr_schedule_from_flags(o.lr_schedule, o.lr_warmup_steps, o.lr_decay_rate, o.lr_decay_steps);
    if (!schedule) usage(schedule.error().message);
    c.optimizer.schedule = *schedule;
    if (!std::isfinite(o.weight_decay) || o.weight_decay < 0.0f)
        usage("--weight-decay must be a finite number >= 0 (0: no decay)");
    // Not lamb: its W p enters the direction that the trust ratio rescales (common/lamb.h), so a step's
    // norm is lr x ||p|| whatever W (with a zero gradient, p *= 1 - lr).
    const bool shrinks = *kind == OptimizerKind::kSgd || *kind == OptimizerKind::kMomentum ||
                         *kind == OptimizerKind::kNesterov || *kind == OptimizerKind::kAdamW;
    if (shrinks && double(o.weight_decay) * double(o.learning_rate) >= 1.0)
        usage("--weight-decay times --learning-rate must be < 1 with --optimizer " + o.optimizer +
              " (each update would scale the weights by 1 - lr W <= 0)");
    auto decay_on = parse_weight_decay_on(o.weight_decay_on);
    if (!decay_on) usage("--weight-decay-on: " + decay_on.error().message);
    c.optimizer.weight_decay = o.weight_decay;
    c.optimizer.weight_decay_on = *decay_on;
    if (!std::isfinite(o.clip_global_norm) || o.clip_global_norm < 0.0f)
        usage("--clip-global-norm must be a finite number >= 0 (0: off)");
    c.optimizer.clip_global_norm = o.clip_global_norm;
    set_hyperparameters(o, c.optimizer);
    if (!std::isfinite(o.label_smoothing) || o.label_smoothing < 0.0f || o.label_smoothing >= 1.0f)
        usage("--label-smoothing must be a number in [0, 1) (0: off)");
    if (o.label_smoothing > 0.0f && c.model->loss != nn::LossKind::kSoftmaxCrossEntropy)
        usage(std::string("--label-smoothing applies to the softmax_cross_entropy loss only; model ") + c.model->name +
              "'s loss is " + nn::to_string(c.model->loss) +
              (c.model->loss == nn::LossKind::kGraph ? " (its softmax_cross_entropy_loss's \"label_smoothing\" sets it)" : ""));
    c.network.label_smoothing = o.label_smoothing;
    if (!std::isfinite(o.ema_decay) || o.ema_decay < 0.0f || o.ema_decay >= 1.0f)
        usage("--ema-decay must be a number in [0, 1) (0: no moving average; 0.999 averages over ~1000 updates)");
    c.optimizer.ema_decay = o.ema_decay;
    set_param_groups(o, *c.model, c.optimizer);
    auto shard = parse_shard(o.shard);
    if (!shard) usage(shard.error().message);
    c.shard = *shard;
    c.seed = o.seed;
    c.sparse_tables = o.sparse_embeddings;
    auto augment = parse_augment(o.augment);
    if (!augment) usage(augment.error().message);
    c.augment = *augment;
    return c;
}

nlohmann::json optimizer_summary(const OptimizerConfig& o) {
    nlohmann::json out = {{"optimizer_form", std::string(optimizer_form(o.kind))},
                          {"weight_decay", o.weight_decay},
                          {"weight_decay_on", std::string(to_string(o.weight_decay_on))},
                          {"clip_global_norm", o.clip_global_norm},
                          {"ema_decay", o.ema_decay},
                          {"param_groups", to_json(o.groups)}};
    if (uses_momentum(o.kind)) out["momentum"] = o.momentum;
    if (uses_betas(o.kind)) out.update({{"beta1", o.beta1}, {"beta2", o.beta2}, {"epsilon", o.epsilon}});
    return out;
}

std::vector<double> given_target_accuracy(const TrainOptions& o) {
    if (o.target_accuracy.empty()) return {};
    auto targets = parse_target_accuracy(o.target_accuracy);
    if (!targets) throw UsageError(targets.error().message);
    return *targets;
}

std::string dataset_name(const TrainOptions& o) {
    return o.train_images.empty() && o.train_data.empty() ? o.dataset : "files";
}

std::string resolved_data_dir(const TrainOptions& o) {
    if (!o.data_dir.empty()) return o.data_dir;
    auto kind = parse_dataset_kind(o.dataset);
    return default_data_dir(kind ? *kind : DatasetKind::kMnist);
}

void set_compute_threads(int threads) {
    if (threads > 0) omp_set_num_threads(threads);
}

}  // namespace psrun::worker
