// The training recipe a model file may carry: what it was published with. Every field is
// optional; command-line options win over it (the caller merges).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

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
    std::optional<double> label_smoothing;   // [0, 1) (--label-smoothing)
    bool operator==(const Recipe&) const = default;
};

// {"optimizer": "adam", "learning_rate": 1e-4, "lr_decay": {"rate": 0.95, "steps": 1000},
//  "batch_size": 50, "steps": 20000, "weight_decay": 0, "beta1": 0.9, "beta2": 0.999,
//  "epsilon": 1e-8, "label_smoothing": 0} ("momentum" with momentum or nesterov). `where`
// prefixes errors ("model F: recipe").
Result<Recipe> parse_recipe(const nlohmann::json& value, const std::string& where);
nlohmann::json to_json(const Recipe& recipe);
// "optimizer adam, learning_rate 0.0001, batch_size 50, steps 20000" (fields present only).
std::string to_string(const Recipe& recipe);

}  // namespace psrun::nn
