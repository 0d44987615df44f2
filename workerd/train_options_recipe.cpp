// A recipe's settings merged under the command line's, the model resolved (and its own recipe
// read), and --global-batch-size split over the workers (train_options.h).
#include "workerd/train_options.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include <spdlog/spdlog.h>

#include "workerd/onnx/model_loader.h"
#include "workerd/run_recipe.h"

namespace psrun::worker {

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
        else to = *from;
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
        const auto schedule =
            o.lr_schedule.empty() ? Result<LrSchedule>(LrSchedule{}) : parse_lr_schedule(o.lr_schedule);
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
    for (const auto& warning : loaded->import_warnings) spdlog::warn("--model {}: {}", o.model, warning);
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
        throw UsageError(
            name + " " + std::to_string(g) + " does not split evenly over " + std::to_string(workers) + " workers" +
            (parts > static_cast<int>(workers) ? " x --accumulate-steps " + std::to_string(o.accumulate_steps) : "") +
            ": give a multiple of " + std::to_string(parts));
    o.batch_size = g / parts;
}

}  // namespace psrun::worker
