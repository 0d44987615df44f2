#include "workerd/nn/recipe.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>
#include <utility>

#include "common/lr_schedule.h"
#include "common/optimizer.h"
#include "common/param_groups.h"
#include "common/wire.h"
#include "workerd/nn/field_reader.h"
#include "workerd/nn/shape.h"

namespace psrun::nn {

namespace {
// The optional numbers after "steps", in the order to_json and to_string write them.
std::array<std::pair<const char*, const std::optional<double>*>, 8> recipe_numbers(const Recipe& r) {
    return {{{"weight_decay", &r.weight_decay},
             {"momentum", &r.momentum},
             {"beta1", &r.beta1},
             {"beta2", &r.beta2},
             {"epsilon", &r.epsilon},
             {"label_smoothing", &r.label_smoothing},
             {"clip_global_norm", &r.clip_global_norm},
             {"ema_decay", &r.ema_decay}}};
}
// The optional counts beside batch_size and steps.
std::array<std::pair<const char*, const std::optional<std::int64_t>*>, 3> recipe_counts(const Recipe& r) {
    return {{{"lr_warmup_steps", &r.lr_warmup_steps},
             {"accumulate_steps", &r.accumulate_steps},
             {"global_batch_size", &r.global_batch_size}}};
}

// Every field parse_recipe knows (FieldReader::finish names the closest for a misspelt one).
constexpr std::array kRecipeFields = {"optimizer",       "learning_rate",    "lr_decay",         "batch_size",
                                      "steps",           "weight_decay",     "momentum",         "beta1",
                                      "beta2",           "epsilon",          "label_smoothing",  "lr_schedule",
                                      "lr_warmup_steps", "clip_global_norm", "weight_decay_on",  "param_groups",
                                      "ema_decay",       "accumulate_steps", "global_batch_size"};

// The schedule fields among themselves, as lr_schedule_from_flags checks their flags: lr_decay
// only beside a constant schedule, and one warm-up.
Result<void> check_schedule(const Recipe& recipe, FieldReader& reader) {
    if (!recipe.lr_schedule) return {};
    auto schedule = parse_lr_schedule(*recipe.lr_schedule);
    if (!schedule) return tl::unexpected(reader.fail("lr_schedule", schedule.error().message));
    if (recipe.lr_decay_steps && recipe.lr_decay_rate != 1.0 && schedule->kind != LrScheduleKind::kConstant)
        return tl::unexpected(reader.fail(
            "lr_decay", "and lr_schedule " + std::string(to_string(schedule->kind)) +
                            " both set the decay: give one (lr_decay {\"rate\": R, \"steps\": N} is lr_schedule "
                            "exponential:rate=R,steps=N)"));
    if (recipe.lr_warmup_steps && *recipe.lr_warmup_steps > 0 && schedule->warmup_steps != 0 &&
        schedule->warmup_steps != static_cast<std::uint64_t>(*recipe.lr_warmup_steps))
        return tl::unexpected(reader.fail(
            "lr_warmup_steps", std::to_string(*recipe.lr_warmup_steps) + " and lr_schedule's warmup=" +
                                   std::to_string(schedule->warmup_steps) + " disagree: give the warm-up once"));
    return {};
}

Result<std::vector<std::string>> read_param_groups(FieldReader& reader) {
    const auto& list = reader.raw("param_groups");
    if (!list.is_array())
        return tl::unexpected(reader.fail("param_groups",
                                          "expected a list of \"PATTERN:lr_mult=M,weight_decay=W\" "
                                          "strings, got " +
                                              describe_value(list)));
    if (list.size() > wire::kMaxParamGroups)
        return tl::unexpected(reader.fail("param_groups", "at most " + std::to_string(wire::kMaxParamGroups) +
                                                              " groups, got " + std::to_string(list.size())));
    std::vector<std::string> groups;
    for (std::size_t i = 0; i < list.size(); ++i) {
        const auto& item = list[i];
        if (!item.is_string())
            return tl::unexpected(reader.fail(
                "param_groups", "item " + std::to_string(i) + ": expected a string, got " + describe_value(item)));
        auto group = parse_param_group(item.get_ref<const std::string&>());
        if (!group)
            return tl::unexpected(
                reader.fail("param_groups", "item " + std::to_string(i) + ": " + group.error().message));
        groups.push_back(item.get<std::string>());
    }
    return groups;
}
}  // namespace

Result<Recipe> parse_recipe(const nlohmann::json& value, const std::string& where) {
    if (!value.is_object())
        return make_error(ErrorCode::kInvalidArgument, where + ": expected an object, got " + describe_value(value));
    FieldReader reader(value, where);
    Recipe recipe;
    if (reader.has("optimizer")) {
        PSRUN_TRY_ASSIGN(auto name, reader.string("optimizer", std::nullopt));
        if (auto kind = parse_optimizer_kind(name); !kind)
            return tl::unexpected(reader.fail("optimizer", kind.error().message));
        recipe.optimizer = name;
    }
    if (reader.has("learning_rate")) {
        PSRUN_TRY_ASSIGN(auto rate, reader.number("learning_rate", std::nullopt));
        if (!(rate > 0.0))
            return tl::unexpected(
                reader.fail("learning_rate", "expected a positive number, got " + describe_value(rate)));
        recipe.learning_rate = rate;
    }
    if (reader.has("lr_decay")) {
        const auto& decay = reader.raw("lr_decay");
        if (!decay.is_object())
            return tl::unexpected(
                reader.fail("lr_decay", "expected {\"rate\": r, \"steps\": n}, got " + describe_value(decay)));
        FieldReader inner(decay, where + ": lr_decay");
        PSRUN_TRY_ASSIGN(auto rate, inner.number("rate", std::nullopt));
        if (!(rate > 0.0 && rate <= 1.0))
            return tl::unexpected(inner.fail("rate", "expected a number in (0, 1], got " + describe_value(rate)));
        PSRUN_TRY_ASSIGN(auto steps, inner.integer("steps", std::nullopt, 1, kMaxTensorElements));
        PSRUN_TRY(inner.finish());
        recipe.lr_decay_rate = rate;
        recipe.lr_decay_steps = steps;
    }
    if (reader.has("batch_size")) {
        PSRUN_TRY_ASSIGN(auto batch, reader.integer("batch_size", std::nullopt, 1, kMaxTensorElements));
        recipe.batch_size = batch;
    }
    if (reader.has("steps")) {
        PSRUN_TRY_ASSIGN(auto steps, reader.integer("steps", std::nullopt, 1, INT64_MAX / 2));
        recipe.steps = steps;
    }
    // Each of these is a finite number in its range: low <= v (low < v with `open_low`), and
    // v < high (v <= high with `closed_high`).
    auto read = [&](const char* field, std::optional<double>& to, bool open_low, double high, bool closed_high,
                    const char* range) -> Result<void> {
        if (!reader.has(field)) return {};
        PSRUN_TRY_ASSIGN(auto v, reader.number(field, std::nullopt));
        if ((open_low ? !(v > 0.0) : !(v >= 0.0)) || (closed_high ? !(v <= high) : !(v < high)))
            return tl::unexpected(
                reader.fail(field, std::string("expected a number ") + range + ", got " + describe_value(v)));
        to = v;
        return {};
    };
    const double inf = std::numeric_limits<double>::infinity();
    for (auto [field, to, open, high, closed, range] :
         {std::tuple{"weight_decay", &recipe.weight_decay, false, inf, false, ">= 0"},
          std::tuple{"momentum", &recipe.momentum, false, 1.0, false, "in [0, 1)"},
          std::tuple{"beta1", &recipe.beta1, false, 1.0, false, "in [0, 1)"},
          std::tuple{"beta2", &recipe.beta2, false, 1.0, false, "in [0, 1)"},
          std::tuple{"epsilon", &recipe.epsilon, true, inf, false, "> 0"},
          std::tuple{"label_smoothing", &recipe.label_smoothing, false, 1.0, false, "in [0, 1)"},
          std::tuple{"clip_global_norm", &recipe.clip_global_norm, false, 1e30, true, "in [0, 1e30] (0: off)"},
          std::tuple{"ema_decay", &recipe.ema_decay, false, 1.0, false, "in [0, 1) (0: off)"}})
        PSRUN_TRY(read(field, *to, open, high, closed, range));
    for (auto [field, to, low, high] :
         {std::tuple{"lr_warmup_steps", &recipe.lr_warmup_steps, std::int64_t{0}, kMaxRecipeSteps},
          std::tuple{"accumulate_steps", &recipe.accumulate_steps, std::int64_t{1}, kMaxRecipeAccumulateSteps},
          std::tuple{"global_batch_size", &recipe.global_batch_size, std::int64_t{1}, kMaxRecipeGlobalBatch}}) {
        if (!reader.has(field)) continue;
        PSRUN_TRY_ASSIGN(auto v, reader.integer(field, std::nullopt, low, high));
        *to = v;
    }
    if (reader.has("lr_schedule")) {
        PSRUN_TRY_ASSIGN(auto text, reader.string("lr_schedule", std::nullopt));
        recipe.lr_schedule = text;
    }
    PSRUN_TRY(check_schedule(recipe, reader));
    if (reader.has("weight_decay_on")) {
        PSRUN_TRY_ASSIGN(auto on, reader.choice("weight_decay_on", std::nullopt, {"matrices", "all"}));
        recipe.weight_decay_on = on == 0 ? "matrices" : "all";
    }
    if (reader.has("param_groups")) {
        PSRUN_TRY_ASSIGN(auto groups, read_param_groups(reader));
        recipe.param_groups = std::move(groups);
    }
    if (recipe.optimizer) {
        const auto kind = *parse_optimizer_kind(*recipe.optimizer);
        if (recipe.momentum && !uses_momentum(kind))
            return tl::unexpected(reader.fail("momentum", "optimizer " + *recipe.optimizer + " has no momentum"));
        for (auto [field, given] : {std::pair{"beta1", &recipe.beta1}, std::pair{"beta2", &recipe.beta2},
                                    std::pair{"epsilon", &recipe.epsilon}})
            if (*given && !uses_betas(kind))
                return tl::unexpected(reader.fail(field, "optimizer " + *recipe.optimizer + " has no " + field));
    }
    for (const auto field : kRecipeFields) reader.allow(field);
    PSRUN_TRY(reader.finish());
    return recipe;
}

Result<Recipe> parse_recipe_text(std::string_view text, const std::string& source) {
    auto fail = [&](const std::string& what) { return make_error(ErrorCode::kInvalidArgument, source + ": " + what); };
    if (text.size() > kMaxRecipeTextBytes)
        return fail("larger than " + std::to_string(kMaxRecipeTextBytes) + " bytes: not a recipe");
    auto parsed = parse_json_text(text);
    if (!parsed) return fail(parsed.error().message);
    const nlohmann::json& document = *parsed;
    if (!document.is_object())
        return fail("expected {\"recipe\": {...}} or a recipe object, got " + describe_value(document));
    if (document.contains("recipe")) {
        if (document.size() != 1)
            return fail(
                "expected {\"recipe\": {...}} or a recipe object; this object has \"recipe\" beside other "
                "fields (a model file? its recipe applies through --model)");
        return parse_recipe(document.at("recipe"), source + ": recipe");
    }
    return parse_recipe(document, source);
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
    for (auto [name, value] : recipe_counts(recipe))
        if (*value) out[name] = **value;
    if (recipe.lr_schedule) out["lr_schedule"] = *recipe.lr_schedule;
    if (recipe.weight_decay_on) out["weight_decay_on"] = *recipe.weight_decay_on;
    if (recipe.param_groups) out["param_groups"] = *recipe.param_groups;
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
    if (recipe.lr_decay_rate && recipe.lr_decay_steps) {
        std::ostringstream decay;
        decay << *recipe.lr_decay_rate << " every " << *recipe.lr_decay_steps << " steps";
        field("lr_decay", decay.str());
    }
    if (recipe.lr_schedule) field("lr_schedule", *recipe.lr_schedule);
    if (recipe.batch_size) field("batch_size", *recipe.batch_size);
    if (recipe.steps) field("steps", *recipe.steps);
    for (auto [name, value] : recipe_numbers(recipe))
        if (*value) field(name, **value);
    for (auto [name, value] : recipe_counts(recipe))
        if (*value) field(name, **value);
    if (recipe.weight_decay_on) field("weight_decay_on", *recipe.weight_decay_on);
    if (recipe.param_groups) {
        std::string groups;
        for (const auto& g : *recipe.param_groups) groups += (groups.empty() ? "" : " ") + g;
        field("param_groups", "[" + groups + "]");
    }
    return out.str();
}

}  // namespace psrun::nn
