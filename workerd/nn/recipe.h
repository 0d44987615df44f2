// The training recipe a model file may carry (what it was published with), and the recipe file
// `--recipe F` reads and a run records as <model-dir>/recipe.json: one grammar for the three.
// Every field is optional; the caller merges (workerd/train_options.cpp: the command line wins
// over the --recipe file, which wins over the model's recipe, field by field).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace psrun::nn {

struct Recipe {
    std::optional<std::string> optimizer;  // a name --optimizer accepts (common/optimizer.h)
    std::optional<double> learning_rate;   // > 0
    // Exponential decay as TF 1.x's exponential_decay: rate in (0, 1], steps >= 1; both or none.
    std::optional<double> lr_decay_rate;
    std::optional<std::int64_t> lr_decay_steps;
    std::optional<std::int64_t> batch_size;  // >= 1
    std::optional<std::int64_t> steps;       // >= 1
    std::optional<double> weight_decay;      // finite, >= 0 (--weight-decay)
    // The optimizer's hyperparameters (--momentum, --beta1, --beta2, --epsilon): momentum, beta1
    // and beta2 in [0, 1), epsilon finite > 0. A recipe naming its optimizer gives only those it
    // reads (common/optimizer.h uses_momentum, uses_betas).
    std::optional<double> momentum, beta1, beta2, epsilon;
    std::optional<double> label_smoothing;  // [0, 1) (--label-smoothing)
    // The rest mirror their flags and their checks (docs/running.md):
    std::optional<std::string> lr_schedule;       // --lr-schedule text (common/lr_schedule.h)
    std::optional<std::int64_t> lr_warmup_steps;  // --lr-warmup-steps, 0..kMaxRecipeSteps
    std::optional<double> clip_global_norm;       // --clip-global-norm, [0, 1e30] (0: off)
    std::optional<std::string> weight_decay_on;   // --weight-decay-on: "matrices" or "all"
    // --param-group, each "PATTERN:lr_mult=M,weight_decay=W" (common/param_groups.h), at most
    // wire::kMaxParamGroups; an empty list is "no groups" (it still wins over a lower layer's).
    std::optional<std::vector<std::string>> param_groups;
    std::optional<double> ema_decay;               // --ema-decay, [0, 1) (0: off)
    std::optional<std::int64_t> accumulate_steps;  // --accumulate-steps, 1..kMaxRecipeAccumulateSteps
    // --global-batch-size, 1..kMaxRecipeGlobalBatch: the examples of one global step, split over
    // the workers. It decides the per-worker batch when given; batch_size beside it is then only
    // a record of what it came to (a run's recipe.json writes both).
    std::optional<std::int64_t> global_batch_size;
    bool operator==(const Recipe&) const = default;
};

inline constexpr std::int64_t kMaxRecipeSteps = 1000000000000;         // 1e12, as the step flags
inline constexpr std::int64_t kMaxRecipeAccumulateSteps = 4096;        // = worker::kMaxAccumulateSteps
inline constexpr std::int64_t kMaxRecipeGlobalBatch = 65536LL * 4096;  // --global-batch-size's range
// A recipe file larger than this is refused before it is parsed.
inline constexpr std::size_t kMaxRecipeTextBytes = 1 << 20;

// {"optimizer": "adam", "learning_rate": 1e-4, "lr_decay": {"rate": 0.95, "steps": 1000},
//  "batch_size": 50, "steps": 20000, "weight_decay": 0, "beta1": 0.9, "beta2": 0.999,
//  "epsilon": 1e-8, "label_smoothing": 0, "lr_schedule": "cosine:steps=20000",
//  "lr_warmup_steps": 500, "clip_global_norm": 1, "weight_decay_on": "matrices",
//  "param_groups": ["*/b:lr_mult=0"], "ema_decay": 0.999, "accumulate_steps": 2,
//  "global_batch_size": 200} ("momentum" with momentum or nesterov). The fields must agree with
// each other as their flags must (lr_decay or a schedule that is not constant, not both; the same
// warm-up in lr_warmup_steps and the schedule's warmup=). `where` prefixes errors ("model F:
// recipe"; `<where>: field "ema_decay": expected ...`).
Result<Recipe> parse_recipe(const nlohmann::json& value, const std::string& where);
// A recipe file's text: {"recipe": {...}} (an object whose only field is "recipe") or the bare
// recipe object. Errors start with `source` ("--recipe F: ..."); a JSON syntax error names its
// line and column; larger than kMaxRecipeTextBytes is refused.
Result<Recipe> parse_recipe_text(std::string_view text, const std::string& source);
// The fields present only (a recipe without the new fields writes what it always wrote, so the
// model's canonical JSON is unchanged).
nlohmann::json to_json(const Recipe& recipe);
// "optimizer adam, learning_rate 0.0001, batch_size 50, steps 20000" (fields present only).
std::string to_string(const Recipe& recipe);

}  // namespace psrun::nn
