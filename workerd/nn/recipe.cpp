#include "workerd/nn/recipe.h"

#include <sstream>

#include "common/optimizer.h"
#include "workerd/nn/field_reader.h"
#include "workerd/nn/shape.h"

namespace psrun::nn {

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
    for (const auto field : {"optimizer", "learning_rate", "lr_decay", "batch_size", "steps"}) reader.allow(field);
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
    return out.str();
}

}  // namespace psrun::nn
