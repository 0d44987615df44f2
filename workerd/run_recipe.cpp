#include "workerd/run_recipe.h"

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "common/checkpoint_store.h"
#include "common/param_groups.h"
#include "common/utf8.h"

namespace psrun::worker {

namespace {
// The shortest decimal that reads back as `v` as a float, as a double: 1e-4f is 0.0001 in the
// file, not 9.99999974737875e-05.
double decimal(float v) {
    char text[64];
    const auto written = std::to_chars(text, text + sizeof text, v);
    double out = v;
    if (written.ec == std::errc()) std::from_chars(text, written.ptr, out);
    return out;
}
}  // namespace

Result<nn::Recipe> read_recipe_file(const std::string& path, const std::string& where) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return make_error(ErrorCode::kIo,
                          where + ": cannot read it: " + std::error_code(errno, std::generic_category()).message());
    std::string text;
    text.resize(nn::kMaxRecipeTextBytes + 1);  // one byte more than allowed: a larger file is refused
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (in.bad()) return make_error(ErrorCode::kIo, where + ": cannot read it");
    text.resize(static_cast<std::size_t>(in.gcount()));
    return nn::parse_recipe_text(text, where);
}

nn::Recipe effective_recipe(const TrainOptions& o, const TrainerConfig& c) {
    const OptimizerConfig& opt = c.optimizer;
    nn::Recipe r;
    r.optimizer = std::string(to_string(opt.kind));
    r.learning_rate = decimal(o.learning_rate);
    if (o.lr_decay_steps > 0) {
        r.lr_decay_rate = decimal(o.lr_decay_rate);
        r.lr_decay_steps = o.lr_decay_steps;
    }
    r.lr_schedule = opt.schedule.to_string();
    r.lr_warmup_steps = static_cast<std::int64_t>(opt.schedule.warmup_steps);
    r.batch_size = o.batch_size;
    if (o.global_batch_size > 0) r.global_batch_size = o.global_batch_size;
    r.accumulate_steps = o.accumulate_steps;
    if (o.steps >= 1) r.steps = o.steps;
    r.weight_decay = decimal(opt.weight_decay);
    r.weight_decay_on = std::string(to_string(opt.weight_decay_on));
    if (uses_momentum(opt.kind)) r.momentum = decimal(opt.momentum);
    if (uses_betas(opt.kind)) {
        r.beta1 = decimal(opt.beta1);
        r.beta2 = decimal(opt.beta2);
        r.epsilon = decimal(opt.epsilon);
    }
    r.label_smoothing = decimal(o.label_smoothing);
    r.clip_global_norm = decimal(opt.clip_global_norm);
    r.param_groups.emplace();
    for (const auto& g : opt.groups) r.param_groups->push_back(to_string(g));
    r.ema_decay = decimal(opt.ema_decay);
    return r;
}

std::string recipe_document(const nn::Recipe& recipe, int indent) {
    return json_text(nlohmann::json{{"recipe", nn::to_json(recipe)}}, indent);
}

Result<void> write_run_recipe(const std::string& model_dir, const nn::Recipe& recipe) {
    std::error_code ec;
    std::filesystem::create_directories(model_dir, ec);
    if (ec) return make_error(ErrorCode::kIo, model_dir + ": cannot create it: " + ec.message());
    const std::string path = std::filesystem::absolute(model_dir).string() + "/" + kRunRecipeFile;
    return write_file_atomically(path, recipe_document(recipe, 2) + "\n");
}

Result<std::optional<nn::Recipe>> read_run_recipe(const std::string& model_dir) {
    const std::string path = model_dir + "/" + kRunRecipeFile;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return std::optional<nn::Recipe>{};
    PSRUN_TRY_ASSIGN(auto recipe, read_recipe_file(path, path));
    return std::optional<nn::Recipe>(std::move(recipe));
}

}  // namespace psrun::worker
