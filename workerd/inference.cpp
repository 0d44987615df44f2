#include "workerd/inference.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>

#include <nlohmann/json.hpp>

#include "common/checkpoint_params.h"
#include "common/checkpoint_store.h"
#include "common/checkpointer.h"
#include "workerd/data/sampler.h"
#include "workerd/keyed_checkpoint.h"
#include "workerd/keyed_lookup.h"
#include "workerd/model_identity.h"
#include "workerd/nn/network.h"
#include "workerd/nn/zoo.h"
#include "workerd/parameter_set.h"

namespace psrun::worker {
namespace {

std::string list_steps(const std::vector<CheckpointInfo>& all) {
    std::string text;
    for (const auto& c : all) text += (text.empty() ? "" : ", ") + std::to_string(c.step);
    return text;
}

// "dataset" of the chief's summary.json, if the model dir has one.
std::string recorded_dataset(const std::string& model_dir) {
    std::ifstream in(model_dir + "/summary.json");
    if (!in) return "";
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("dataset") || !j["dataset"].is_string()) return "";
    return j["dataset"].get<std::string>();
}

// The parameters of checkpoint `info` for the model its manifest records; its tables keyed by
// raw ids (which `raw_ids` must name) apart.
Result<InferenceModel> load_one(const CheckpointInfo& info, CheckpointValues values,
                                const std::vector<std::string>& raw_ids) {
    PSRUN_TRY_ASSIGN(auto manifest, CheckpointStore::read_manifest(info));
    // A manifest older than model records held TF's mnist_deep, the only model then.
    PSRUN_TRY_ASSIGN(auto fallback, nn::load_model("mnist_deep"));
    const std::string where = "checkpoint " + info.dir;
    PSRUN_TRY_ASSIGN(auto model, model_from_record(manifest_model(manifest), where, fallback));
    auto tensors = wire_tensors(model_tensors(model));
    const auto model_dir = std::filesystem::path(info.dir).parent_path().string();
    auto keyed =
        mark_keyed_tables(manifest, model, tensors, recorded_run_seed(model_dir.empty() ? "." : model_dir), where);
    if (!keyed) return tl::unexpected(keyed.error());
    PSRUN_TRY(check_raw_id_names(model, *keyed, raw_ids, where));
    PSRUN_TRY_ASSIGN(auto params, load_checkpoint_parameters(info.dir, tensors, values));  // the keyed tables left out
    PSRUN_TRY_ASSIGN(auto rows, load_keyed_tables(info.dir, tensors, *keyed, values == CheckpointValues::kAverage));
    InferenceModel out;
    out.model = std::move(model);
    out.params = std::move(params.values);
    out.keyed = std::move(rows);
    out.raw_ids = raw_ids;
    out.source = "checkpoint " + info.dir + (values == CheckpointValues::kAverage ? " (moving average)" : "");
    out.step = info.step;
    return out;
}

}  // namespace

std::vector<std::string> InferenceModel::raw_inputs() const {
    std::vector<std::string> out;
    for (const auto& name : raw_ids)
        for (const auto& n : model.nodes)
            if (n.op == "embedding" && (n.name == name || n.inputs.at(n.data_inputs) == name)) {
                out.push_back(n.inputs.front());
                break;
            }
    return out;
}

Result<InferenceModel> load_checkpoint_model(const std::string& model_dir, std::optional<std::int64_t> step,
                                             CheckpointValues values, const std::vector<std::string>& raw_ids) {
    std::error_code ec;
    if (!std::filesystem::is_directory(model_dir, ec))
        return make_error(ErrorCode::kNotFound,
                          "model dir " + model_dir + " does not exist: give the --model-dir a training run wrote");
    const CheckpointStore store(model_dir, 1);
    const auto all = store.list();
    if (all.empty())
        return make_error(ErrorCode::kNotFound,
                          "model dir " + model_dir +
                              " holds no checkpoint (no ckpt-<step>/ with a manifest): train into it first, with "
                              "checkpoints (the chief writes one at the last step), or give another --model-dir");
    auto chosen = all.end() - 1;
    if (step) {
        chosen = std::find_if(all.begin(), all.end(), [&](const CheckpointInfo& c) { return c.step == *step; });
        if (chosen == all.end())
            return make_error(ErrorCode::kNotFound, "model dir " + model_dir + " has no checkpoint of step " +
                                                        std::to_string(*step) + "; it has steps " + list_steps(all));
    }
    auto loaded = load_one(*chosen, values, raw_ids);
    if (!loaded) {
        // Not damage: nothing there (kNotFound), or --raw-ids that do not fit it (kUnsupported).
        if (loaded.error().code == ErrorCode::kNotFound || loaded.error().code == ErrorCode::kUnsupported)
            return loaded;
        // Name an older checkpoint that verifies, if there is one, as the way out.
        std::string advice = "; no older checkpoint verifies either (retrain, or restore the model dir from a copy)";
        for (auto it = std::make_reverse_iterator(chosen); it != all.rend(); ++it) {
            if (load_one(*it, values, raw_ids)) {
                advice = "; use --checkpoint " + std::to_string(it->step) + " (the newest older one that verifies)";
                break;
            }
        }
        return make_error(ErrorCode::kInvalidArgument, "checkpoint of step " + std::to_string(chosen->step) +
                                                           " is damaged: " + loaded.error().message + advice);
    }
    loaded->dataset = recorded_dataset(model_dir);
    return loaded;
}

namespace {

// Runs the model forward over `images` in batches; after each batch, `take(net, start, valid)`
// reads what it needs of its first `valid` rows (examples start..start+valid).
Result<void> run_batches(const InferenceModel& model, const LabeledImages& images, std::int64_t batch_size,
                         const std::function<void(nn::Network&, std::size_t, std::size_t)>& take) {
    if (batch_size < 1)
        return make_error(ErrorCode::kInvalidArgument, "batch size " + std::to_string(batch_size) + " < 1");
    if (images.columns.size() + 1 + (model.model.label_input > 0 ? 1 : 0) != model.model.inputs.size())
        return make_error(ErrorCode::kInvalidArgument,
                          "model " + model.model.name + " has " + std::to_string(model.model.inputs.size()) +
                              " inputs and the data gives " + std::to_string(images.columns.size() + 1) +
                              ": give each input after the first with --test-input NAME=FILE.npy");
    const std::size_t count = images.size();
    if (count == 0) return {};
    nn::NetworkOptions options;
    options.forward_only = true;
    options.batch_size = static_cast<std::int64_t>(std::min<std::size_t>(static_cast<std::size_t>(batch_size), count));
    for (const auto& name : model.raw_inputs()) {
        const auto no_raw = [&] {
            return make_error(ErrorCode::kInvalidArgument,
                              "input " + name +
                                  " is read by a table keyed by raw ids and the data gives no raw ids "
                                  "for it (load it with InferenceModel::raw_inputs())");
        };
        if (name == model.model.input_name() && images.raw_tokens.size() != count * images.token_length)
            return no_raw();
        for (const auto& c : images.columns)
            if (c.name == name && c.u64.size() != count * c.per_example) return no_raw();
    }
    // Tables keyed by raw ids: the local model's blocks after the dense tensors, filled per batch.
    std::optional<KeyedLookup> keyed;
    nn::ModelDescription local;
    std::vector<float> local_params;
    if (!model.keyed.empty()) {
        keyed.emplace(model.model, model.raw_ids, model.keyed);
        local = keyed->local_model(options.batch_size);
        local_params.assign(static_cast<std::size_t>(local.parameter_count), 0.0f);
        if (model.params.size() + keyed->tail_floats(options.batch_size) != local_params.size())
            return make_error(ErrorCode::kInvalidArgument, "model " + model.model.name + ": " +
                                                               std::to_string(model.params.size()) +
                                                               " dense parameters do not fit its keyed tables' model");
        std::copy(model.params.begin(), model.params.end(), local_params.begin());
    }
    PSRUN_TRY_ASSIGN(
        auto network,
        nn::Network::create(keyed ? local : model.model, options,
                            keyed ? std::span<const float>(local_params) : std::span<const float>(model.params), {}));
    nn::Network& net = *network;
    const auto batch = static_cast<std::size_t>(options.batch_size);
    std::vector<std::uint32_t> indices(batch);
    for (std::size_t start = 0; start < count; start += batch) {
        const std::size_t valid = std::min(batch, count - start);
        for (std::size_t i = 0; i < batch; ++i) indices[i] = static_cast<std::uint32_t>(i < valid ? start + i : 0);
        BatchView view{net.input(), net.input_ids(), net.labels(), net.targets(), {}};
        if (keyed) view.inputs_u64 = keyed->raw_ids(0, options.batch_size);
        for (std::size_t i = 1; i < model.model.inputs.size(); ++i)
            if (!model.model.fed_by_labels(i))
                view.columns.push_back(
                    ColumnSpan{net.input(i), net.input_ids(i),
                               keyed ? keyed->raw_ids(i, options.batch_size) : std::span<std::uint64_t>()});
        fill_examples(images, indices, view);
        if (keyed)
            keyed->map_batch([&net](std::size_t input) { return net.input_ids(input); },
                             static_cast<std::int64_t>(valid), options.batch_size, local_params);
        net.forward(false);
        take(net, start, valid);
    }
    return {};
}

}  // namespace

Result<std::vector<float>> predict_probabilities(const InferenceModel& model, const LabeledImages& images,
                                                 std::int64_t batch_size) {
    if (model.model.loss == nn::LossKind::kGraph && model.model.head.empty())
        return make_error(
            ErrorCode::kInvalidArgument,
            "model " + model.model.name +
                " ends in its own loss and has no class head to predict with (a softmax_cross_entropy_loss "
                "or nll_loss over N x C scores reading the data's labels)");
    const auto classes = static_cast<std::size_t>(model.model.classes);
    std::vector<float> out(images.size() * classes);
    std::vector<float> probs;
    auto ok = run_batches(model, images, batch_size, [&](nn::Network& net, std::size_t start, std::size_t valid) {
        probs.resize(static_cast<std::size_t>(net.options().batch_size) * classes);
        net.probabilities(probs);
        std::copy_n(probs.begin(), valid * classes, out.begin() + static_cast<std::ptrdiff_t>(start * classes));
    });
    if (!ok) return tl::unexpected(ok.error());
    return out;
}

Result<std::vector<HeadPrediction>> predict_heads(const InferenceModel& model, const LabeledImages& images,
                                                  std::int64_t batch_size) {
    const auto& heads = model.model.heads;
    if (heads.empty())
        return make_error(ErrorCode::kInvalidArgument, "model " + model.model.name +
                                                           " has no heads (scores a loss of its graph reads against a "
                                                           "target input)");
    std::vector<HeadPrediction> out;
    for (const auto& h : heads) {
        HeadPrediction prediction{h.value, h.kind, h.width, h.spatial, {}};
        prediction.probabilities.resize(images.size() * prediction.row_size());
        out.push_back(std::move(prediction));
    }
    auto ok = run_batches(model, images, batch_size, [&](nn::Network& net, std::size_t start, std::size_t valid) {
        for (std::size_t k = 0; k < heads.size(); ++k) {
            const auto w = static_cast<std::size_t>(heads[k].width);
            const auto positions = static_cast<std::size_t>(heads[k].positions());
            const std::size_t row_size = out[k].row_size();
            const auto scores = net.head_outputs(k);
            float* dst = out[k].probabilities.data() + start * row_size;
            for (std::size_t i = 0; i < valid; ++i) {
                const float* row = scores.data() + i * row_size;
                float* p = dst + i * row_size;
                if (heads[k].kind == nn::HeadKind::kValue) {
                    std::copy_n(row, w, p);
                    continue;
                }
                if (heads[k].kind == nn::HeadKind::kSigmoid) {
                    for (std::size_t c = 0; c < w; ++c)
                        p[c] = static_cast<float>(1.0 / (1.0 + std::exp(-double(row[c]))));
                    continue;
                }
                // The softmax over the classes, at each position (stride `positions`).
                for (std::size_t q = 0; q < positions; ++q) {
                    double mx = row[q];
                    for (std::size_t c = 1; c < w; ++c) mx = std::max(mx, double(row[c * positions + q]));
                    double sum = 0;
                    for (std::size_t c = 0; c < w; ++c) sum += std::exp(double(row[c * positions + q]) - mx);
                    for (std::size_t c = 0; c < w; ++c)
                        p[c * positions + q] = static_cast<float>(std::exp(double(row[c * positions + q]) - mx) / sum);
                }
            }
        }
    });
    if (!ok) return tl::unexpected(ok.error());
    return out;
}

std::vector<std::int32_t> arg_max(const std::vector<float>& probabilities, std::int64_t classes) {
    const auto z = static_cast<std::size_t>(classes);
    std::vector<std::int32_t> out(z == 0 ? 0 : probabilities.size() / z);
    for (std::size_t i = 0; i < out.size(); ++i) {
        const auto row = probabilities.begin() + static_cast<std::ptrdiff_t>(i * z);
        out[i] = static_cast<std::int32_t>(std::max_element(row, row + static_cast<std::ptrdiff_t>(z)) - row);
    }
    return out;
}

}  // namespace psrun::worker
