#include "common/checkpointer.h"

#include "common/param_groups.h"
#include "common/pause_detector.h"
#include "common/row_init.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace psrun {
namespace fs = std::filesystem;

nlohmann::json describe_layout(const ShardLayout& layout, const std::vector<TensorSpec>& tensors) {
    nlohmann::json j;
    j["num_shards"] = layout.num_shards;
    j["total_floats"] = layout.total;
    j["tensors"] = nlohmann::json::array();
    for (const auto& t : tensors) {
        nlohmann::json entry = {
            {"name", t.name}, {"shape", t.shape}, {"class", to_string(t.tensor_class)}, {"kind", to_string(t.kind)}};
        // A rows tensor's initializer: psrun eval/predict/export give an id of a keyed table that
        // is not a row its initial values from it, as psd serves them (workerd/keyed_rows.h).
        // A table whose checkpoint pieces list blocks (common/row_delta.h) gives the rows they omit
        // their initial values from it too.
        if (t.rows()) entry["row_init"] = row_init_to_json(t.row_init);
        j["tensors"].push_back(std::move(entry));
    }
    j["slices"] = nlohmann::json::array();
    for (const auto& s : layout.slices)
        j["slices"].push_back(
            {{"tensor", tensors.at(s.tensor).name},
             {"offset", s.offset},
             {"length", s.length},
             {"shard", s.shard},
             {"file", "ps-" + std::to_string(s.shard) + "-of-" + std::to_string(layout.num_shards) + ".tensors"}});
    return j;
}

nlohmann::json describe_optimizer(const wire::InitConfig& init) {
    const auto& o = init.optimizer;
    return {{"kind", std::string(to_string(o.kind))},
            {"learning_rate", o.learning_rate},
            {"momentum", o.momentum},
            {"beta1", o.beta1},
            {"beta2", o.beta2},
            {"epsilon", o.epsilon},
            {"adagrad_initial", o.adagrad_initial},
            {"decay_rate", o.decay_rate},
            {"decay_steps", o.decay_steps},
            {"last_step", init.last_step},
            {"lr_schedule", to_json(o.schedule)},
            {"weight_decay", o.weight_decay},
            {"weight_decay_on", std::string(to_string(o.weight_decay_on))},
            {"clip_global_norm", o.clip_global_norm},
            {"ema_decay", o.ema_decay},
            {"param_groups", to_json(o.groups)}};
}

Result<wire::InitConfig> read_optimizer(const nlohmann::json& j) {
    auto bad = [](const std::string& what) {
        return make_error(ErrorCode::kInvalidArgument, "checkpoint manifest optimizer: " + what);
    };
    if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string()) return bad("expected an object with a kind");
    auto kind = parse_optimizer_kind(j["kind"].get<std::string>());
    if (!kind) return bad(kind.error().message);
    wire::InitConfig init;
    auto& o = init.optimizer;
    o.kind = *kind;
    using FloatField = std::pair<const char*, float*>;
    using CountField = std::pair<const char*, std::uint64_t*>;
    for (auto [key, field] : std::initializer_list<FloatField>{{"learning_rate", &o.learning_rate},
                                                               {"momentum", &o.momentum},
                                                               {"beta1", &o.beta1},
                                                               {"beta2", &o.beta2},
                                                               {"epsilon", &o.epsilon},
                                                               {"adagrad_initial", &o.adagrad_initial},
                                                               {"decay_rate", &o.decay_rate}}) {
        if (!j.contains(key) || !j[key].is_number()) return bad(std::string(key) + " is missing or not a number");
        *field = j[key].get<float>();
    }
    for (auto [key, field] :
         std::initializer_list<CountField>{{"decay_steps", &o.decay_steps}, {"last_step", &init.last_step}}) {
        if (!j.contains(key) || !is_json_count(j[key])) return bad(std::string(key) + " is missing or not a count");
        *field = j[key].get<std::uint64_t>();
    }
    if (j.contains("lr_schedule")) {  // older manifests have none: decay_rate/decay_steps are the whole schedule
        auto schedule = lr_schedule_from_json(j["lr_schedule"]);
        if (!schedule) return bad(schedule.error().message);
        o.schedule = std::move(*schedule);
    }
    // Older manifests have none of these: no decay, no clipping, no moving average.
    for (auto [key, field] : std::initializer_list<FloatField>{{"weight_decay", &o.weight_decay},
                                                               {"clip_global_norm", &o.clip_global_norm},
                                                               {"ema_decay", &o.ema_decay}}) {
        if (!j.contains(key)) continue;
        if (!j[key].is_number() || !std::isfinite(j[key].get<double>()) || j[key].get<double>() < 0)
            return bad(std::string(key) + " is not a finite number >= 0");
        *field = j[key].get<float>();
    }
    if (o.ema_decay >= 1.0f) return bad("ema_decay is not below 1");
    if (j.contains("param_groups")) {  // older manifests have none
        auto groups = param_groups_from_json(j["param_groups"]);
        if (!groups) return bad(groups.error().message);
        o.groups = std::move(*groups);
    }
    if (j.contains("weight_decay_on")) {
        if (!j["weight_decay_on"].is_string()) return bad("weight_decay_on is not a string");
        auto on = parse_weight_decay_on(j["weight_decay_on"].get<std::string>());
        if (!on) return bad("weight_decay_on: " + on.error().message);
        o.weight_decay_on = *on;
    }
    return init;
}

nlohmann::json manifest_model(const nlohmann::json& manifest) {
    if (manifest.is_object() && manifest.contains("model") && manifest["model"].is_object()) return manifest["model"];
    return {{"name", "mnist_deep"}};
}

static std::string absolute_dir(const std::string& dir) {
    std::error_code ec;
    auto abs = fs::absolute(dir, ec);
    return ec ? dir : abs.lexically_normal().string();
}

Checkpointer::Checkpointer(CheckpointerOptions options)
    : options_(std::move(options)),
      store_(absolute_dir(options_.model_dir), options_.keep),
      last_time_(std::chrono::steady_clock::now()),
      stopped_at_last_(PauseDetector::process().stopped_total()) {
    options_.model_dir = absolute_dir(options_.model_dir);
}

std::chrono::milliseconds Checkpointer::retry_in() const {
    if (failures_in_row_ == 0) return std::chrono::milliseconds(0);
    const auto shift = std::min<std::uint32_t>(failures_in_row_ - 1, 9);  // 1 s .. 512 s, capped at 300 s
    return std::min(std::chrono::milliseconds(1000L << shift), std::chrono::milliseconds(300000));
}

Result<std::optional<RestoredInfo>> Checkpointer::restore(PsClient& client) {
    abandon();  // the shards restart from a checkpoint: one being written is of the run before
    const auto started = std::chrono::steady_clock::now();
    RestoredInfo out;
    auto latest = store_.latest_valid(&out.warnings);
    for (const auto& w : out.warnings) spdlog::warn("{}", w);
    if (!latest) {
        if (latest.error().code == ErrorCode::kNotFound && out.warnings.empty()) return std::nullopt;
        return make_error(ErrorCode::kInvalidArgument,
                          "every checkpoint in " + options_.model_dir +
                              " is damaged (see the warnings): move them away to start from scratch");
    }
    PSRUN_TRY_ASSIGN(auto manifest, CheckpointStore::read_manifest(*latest));
    out.step = static_cast<std::uint64_t>(latest->step);
    out.dir = latest->dir;
    out.extra = manifest.value("extra", nlohmann::json());
    if (options_.model.is_object()) {
        const nlohmann::json theirs = manifest_model(manifest);
        const std::string their_hash = theirs.value("hash", ""), our_hash = options_.model.value("hash", "");
        const std::string their_name = theirs.value("name", "?"), our_name = options_.model.value("name", "?");
        // A manifest without a hash (older psrun) can only hold mnist_deep: compare by name then.
        const bool same = their_hash.empty() ? their_name == our_name : their_hash == our_hash;
        if (!same)
            return make_error(ErrorCode::kInvalidArgument,
                              "checkpoint " + out.dir + " holds model '" + their_name + "'" +
                                  (their_hash.empty() ? "" : " (architecture " + their_hash.substr(0, 12) + ")") +
                                  " but this run trains model '" + our_name + "' (architecture " +
                                  our_hash.substr(0, 12) +
                                  "): give the --model it was trained with, or another "
                                  "--model-dir to start afresh");
    }
    if (auto recorded = read_optimizer(manifest.value("optimizer", nlohmann::json())); recorded) {
        out.optimizer = recorded->optimizer;
        const auto was = recorded->optimizer.effective_schedule(), now = options_.init.optimizer.effective_schedule();
        if (!(was == now) || recorded->optimizer.learning_rate != options_.init.optimizer.learning_rate)
            spdlog::warn(
                "checkpoint {} was trained at learning rate {} ({}); this run's flags say {} ({}) and apply "
                "from step {} on",
                out.dir, recorded->optimizer.learning_rate, was.to_string(), options_.init.optimizer.learning_rate,
                now.to_string(), out.step);
    } else {
        spdlog::warn("checkpoint {}: {}", out.dir, recorded.error().message);
    }
    wire::InitConfig config = options_.init;
    config.start_step = out.step;
    if (config.last_step != 0 && config.start_step > config.last_step)
        return make_error(ErrorCode::kInvalidArgument,
                          "checkpoint " + out.dir + " is at step " + std::to_string(out.step) + ", beyond --steps " +
                              std::to_string(config.last_step) + ": raise --steps or use another --model-dir");
    if (auto ok = client.restore(config, out.dir); !ok)
        return make_error(ok.error().code, "restore from " + out.dir + " failed: " + ok.error().message);
    last_step_ = out.step;
    last_time_ = std::chrono::steady_clock::now();
    stopped_at_last_ = PauseDetector::process().stopped_total();
    spdlog::info("restored step {} from {} into {} shards ({} ms, verification included)", out.step, out.dir,
                 client.layout().num_shards,
                 std::chrono::duration_cast<std::chrono::milliseconds>(last_time_ - started).count());
    return std::optional<RestoredInfo>(std::move(out));
}

bool Checkpointer::due(std::uint64_t global_step, bool last) const {
    if (last_step_ && *last_step_ == global_step) return false;
    if (last) return true;
    if (background_) return false;
    if (failures_in_row_ > 0 && std::chrono::steady_clock::now() - failed_at_ < retry_in()) return false;
    if (options_.every_steps > 0 && global_step >= last_step_.value_or(0) + options_.every_steps) return true;
    // Time this process was stopped (Slurm suspend, SIGSTOP) is not working time: a resumed job
    // does not checkpoint at once for the time it spent stopped (common/pause_detector.h).
    const auto stopped = PauseDetector::process().stopped_total() - stopped_at_last_;
    return options_.every_secs > 0 && std::chrono::steady_clock::now() - last_time_ - stopped >=
                                          std::chrono::duration<double>(options_.every_secs);
}

}  // namespace psrun
