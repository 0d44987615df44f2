// A run's recipe as a file (docs/models.md "Recipe"): --recipe F reads one, and the chief records
// the recipe a run actually used as <model-dir>/recipe.json, {"recipe": {...}} in nn::Recipe's
// grammar, so that `--recipe <model-dir>/recipe.json` trains with the same settings again;
// `psrun export` copies it into the ONNX file's metadata (onnx_io::kRecipeKey).
#pragma once

#include <optional>
#include <string>

#include "common/result.h"
#include "workerd/nn/recipe.h"
#include "workerd/train_options.h"

namespace psrun::worker {

inline constexpr const char* kRunRecipeFile = "recipe.json";

// The recipe in file `path` (nn::parse_recipe_text). `where` starts errors ("--recipe F"):
// kIo when unreadable, kInvalidArgument naming the field otherwise.
[[nodiscard]] Result<nn::Recipe> read_recipe_file(const std::string& path, const std::string& where);

// Every recipe field the run uses, after the merge and --global-batch-size: optimizer,
// learning_rate, lr_schedule (the --lr-schedule text of the schedule, its warm-up included),
// lr_warmup_steps, lr_decay (when --lr-decay-steps > 0), batch_size (per worker),
// global_batch_size (when one was given), accumulate_steps, steps (when >= 1), weight_decay,
// weight_decay_on, the hyperparameters the optimizer reads (momentum; beta1, beta2, epsilon) as
// resolved, label_smoothing, clip_global_norm, param_groups (canonical), ema_decay. Numbers
// kept as floats are written in their shortest decimal form (1e-4f as 0.0001).
nn::Recipe effective_recipe(const TrainOptions& options, const TrainerConfig& config);

// Writes {"recipe": to_json(recipe)} to <model_dir>/recipe.json atomically (the directory is
// created). Errors: kIo.
[[nodiscard]] Result<void> write_run_recipe(const std::string& model_dir, const nn::Recipe& recipe);

// <model_dir>/recipe.json's recipe; nullopt when there is none. A damaged one: kInvalidArgument
// naming the file and the field.
[[nodiscard]] Result<std::optional<nn::Recipe>> read_run_recipe(const std::string& model_dir);

// The JSON text a file (and the ONNX metadata entry) holds: {"recipe": {...}}, indented by `indent`.
std::string recipe_document(const nn::Recipe& recipe, int indent = -1);

}  // namespace psrun::worker
