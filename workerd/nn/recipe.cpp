#include "workerd/nn/recipe.h"

#include <array>
#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>
#include <utility>

#include "common/optimizer.h"
#include "workerd/nn/field_reader.h"
#include "workerd/nn/shape.h"

namespace psrun::nn {

namespace {
// The optional numbers after "steps", in the order to_json and to_string write them.
std::array<std::pair<const char*, const std::optional<double>*>, 6> recipe_numbers(const Recipe& r) {
    return {{{"weight_decay", &r.weight_decay}, {"momentum", &r.momentum}, {"beta1", &r.beta1},
             {"beta2", &r.beta2}, {"epsilon", &r.epsilon}, {"label_smoothing", &r.label_smoothing}}};
}
}  // namespace

Result<Recipe> parse_recipe(const nlohmann::json& value, const std::string& where) {
    if (!value.is_object())
        return make_error(ErrorCode::kInvalidArgument, where + ": expected an object, got " + describe_value(value));
    FieldReader reader(value, where);
    Recipe recipe;
    if (reader.has("optimizer")) {
        auto name = reader.string("optimizer", std::nullopt);
        if (!name) return tl::unexpected(name.error());
        if (auto kind = parse_optimizer_kind(*name); !kind)
            return tl::unexpected(reader.fail("optimizer", kind.error().message));
        recipe.optimizer = *name;
    }
    if (reader.has("learning_rate")) {
        auto rate = reader.number("learning_rate", std::nullopt);
        if (!rate) return tl::unexpected(rate.error());
        if (!(*rate > 0.0))
            return tl::unexpected(reader.fail("learning_rate", "expected a positive number, got " + describe_value(*rate)));
        recipe.learning_rate = *rate;
    }
    if (reader.has("lr_decay")) {
        const auto& decay = reader.raw("lr_decay");
        if (!decay.is_object())
            return tl::unexpected(reader.fail("lr_decay", "expected {\"rate\": r, \"steps\": n}, got " + describe_value(decay)));
        FieldReader inner(decay, where + ": lr_decay");
        auto rate = inner.number("rate", std::nullopt);
        if (!rate) return tl::unexpected(rate.error());
        if (!(*rate > 0.0 && *rate <= 1.0))
            return tl::unexpected(inner.fail("rate", "expected a number in (0, 1], got " + describe_value(*rate)));
        auto steps = inner.integer("steps", std::nullopt, 1, kMaxTensorElements);
        if (!steps) return tl::unexpected(steps.error());
        if (auto ok = inner.finish(); !ok) return tl::unexpected(ok.error());
        recipe.lr_decay_rate = *rate;
        recipe.lr_decay_steps = *steps;
    }
    if (reader.has("batch_size")) {
        auto batch = reader.integer("batch_size", std::nullopt, 1, kMaxTensorElements);
        if (!batch) return tl::unexpected(batch.error());
        recipe.batch_size = *batch;
    }
    if (reader.has("steps")) {
        auto steps = reader.integer("steps", std::nullopt, 1, INT64_MAX / 2);
        if (!steps) return tl::unexpected(steps.error());
        recipe.steps = *steps;
    }
    // Each of these is a finite number in its range (low <= v, or low < v with `open`; v < high).
    auto read = [&](const char* field, std::optional<double>& to, bool open, double high,
                    const char* range) -> Result<void> {
        if (!reader.has(field)) return {};
        auto v = reader.number(field, std::nullopt);
        if (!v) return tl::unexpected(v.error());
        if ((open ? !(*v > 0.0) : !(*v >= 0.0)) || !(*v < high))
            return tl::unexpected(reader.fail(field, std::string("expected a number ") + range + ", got " +
                                                         describe_value(*v)));
        to = *v;
        return {};
    };
    const double inf = std::numeric_limits<double>::infinity();
    for (auto [field, to, open, high, range] :
         {std::tuple{"weight_decay", &recipe.weight_decay, false, inf, ">= 0"},
          std::tuple{"momentum", &recipe.momentum, false, 1.0, "in [0, 1)"},
          std::tuple{"beta1", &recipe.beta1, false, 1.0, "in [0, 1)"},
          std::tuple{"beta2", &recipe.beta2, false, 1.0, "in [0, 1)"},
          std::tuple{"epsilon", &recipe.epsilon, true, inf, "> 0"},
          std::tuple{"label_smoothing", &recipe.label_smoothing, false, 1.0, "in [0, 1)"}})
        if (auto ok = read(field, *to, open, high, range); !ok) return tl::unexpected(ok.error());
    if (recipe.optimizer) {
        const auto kind = *parse_optimizer_kind(*recipe.optimizer);
        if (recipe.momentum && !uses_momentum(kind))
            return tl::unexpected(reader.fail("momentum", "optimizer " + *recipe.optimizer + " has no momentum"));
        for (auto [field, given] : {std::pair{"beta1", &recipe.beta1}, std::pair{"beta2", &recipe.beta2},
                                    std::pair{"epsilon", &recipe.epsilon}})
            if (*given && !uses_betas(kind))
                return tl::unexpected(reader.fail(field, "optimizer " + *recipe.optimizer + " has no " + field));
    }
    for (const auto field : {"optimizer", "learning_rate", "lr_decay", "batch_size", "steps", "weight_decay", "momentum",
                             "beta1", "beta2", "epsilon", "label_smoothing"})
        reader.allow(field);
    if (auto ok = reader.finish(); !ok) return tl::unexpected(ok.error());
    return recipe;
}

nlohmann::json to_json(const Recipe& recipe) {
    nlohmann::json out = nlohmann::json::object();
    if (recipe.optimizer) out["optimizer"] = *recipe.optimizer;
    if (recipe.learning_rate) out["learning_rate"] = *recipe.learning_rate;
    if (recipe.lr_decay_rate && recipe.lr_decay_steps)
        out["lr_decay"] = {{"rate", *recipe.lr_decay_rate}, {"steps", *recipe.lr_decay_steps}};
    if (recipe.batch_size) out["batch_size"] = *recipe.batch_size;
    if (recipe.steps) out["steps"] = *recipe.steps;
    for (auto [name, value] : recipe_numbers(recipe))
        if (*value) out[name] = **value;
    return out;
}

std::string to_string(const Recipe& recipe) {
    std::ostringstream out;
    const char* sep = "";
    auto field = [&](const char* name, const auto& value) {
        out << sep << name << ' ' << value;
        sep = ", ";
    };
    if (recipe.optimizer) field("optimizer", *recipe.optimizer);
    if (recipe.learning_rate) field("learning_rate", *recipe.learning_rate);
    if (recipe.lr_decay_rate && recipe.lr_decay_steps)
    {
        std::ostringstream decay;
        decay << *recipe.lr_decay_rate << " every " << *recipe.lr_decay_steps << " steps";
        field("lr_decay", decay.str());
    }
    if (recipe.batch_size) field("batch_size", *recipe.batch_size);
    if (recipe.steps) field("steps", *recipe.steps);
    for (auto [name, value] : recipe_numbers(recipe))
        if (*value) field(name, **value);
    return out.str();
}

}  // namespace psrun::nn
