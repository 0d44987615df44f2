// The trainer's configuration from validated flags (train_options.h): optimizer, groups,
// precision, data and what summary.json records of them.
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
#include "workerd/onnx/model_loader.h"
#include "workerd/parameter_set.h"

namespace psrun::worker {

namespace {

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
            throw UsageError("--param-group '" + text + "': the pattern matches no tensor of model " + model.name +
                             " (its tensors: " + names +
                             (names.size() >= 300 ? ", ...; psrun model show lists them all)" : ")"));
        const bool shrinks = c.kind == OptimizerKind::kSgd || c.kind == OptimizerKind::kMomentum ||
                             c.kind == OptimizerKind::kNesterov || c.kind == OptimizerKind::kAdamW;
        const double decay = group->sets_weight_decay ? group->weight_decay : c.weight_decay;
        if (shrinks && double(c.learning_rate) * group->lr_multiplier * decay >= 1.0)
            throw UsageError("--param-group '" + text +
                             "': its learning rate times its weight decay must be < 1 with --optimizer " + o.optimizer +
                             " (each update would scale the weights by 1 - lr W <= 0)");
        c.groups.push_back(std::move(*group));
    }
}

}  // namespace

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
        usage("--augment: model " + c.model->name +
              " has several inputs; augmentation of the primary input "
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
              (c.model->loss == nn::LossKind::kGraph ? " (its softmax_cross_entropy_loss's \"label_smoothing\" sets it)"
                                                     : ""));
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
    c.raw_ids = RawIdTables{o.raw_ids, RowPolicy{.admit_after = o.admit_after,
                                                 .admit_probability = static_cast<float>(o.admit_probability),
                                                 .evict_after = o.evict_after}};
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
