#include "workerd/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <omp.h>
#include <spdlog/spdlog.h>

#include "common/result.h"
#include "common/rng.h"
#include "workerd/data/memory_source.h"
#include "workerd/global_norm.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/prefetch_source.h"

namespace psrun::worker {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }
// Room for the second buffer reserved: growing never moves grads_[0], which the models reference.
std::vector<ParameterSet> make_grads(const std::vector<TensorInfo>& tensors, std::size_t tail) {
    std::vector<ParameterSet> grads;
    grads.reserve(2);
    grads.emplace_back(tensors, tail);
    return grads;
}

// Examples of one update: the local sparse tables hold the distinct ids of all its micro-batches.
std::int64_t step_examples(const TrainerConfig& config) {
    return config.network.batch_size * std::max(1, config.accumulate_steps);
}

const nn::ModelDescription& required(const TrainerConfig& config) {
    if (!config.model) throw std::invalid_argument("TrainerConfig without a model");
    return *config.model;
}

std::unique_ptr<nn::Network> make_network(const nn::ModelDescription& model, nn::NetworkOptions options,
                                          std::span<const float> params, std::span<float> grads) {
    auto created = nn::Network::create(model, options, params, grads);
    if (!created) throw UsageError(created.error().message);
    if (const auto use = (*created)->memory_use(); use.plan_failed)
        spdlog::warn(
            "the engine's buffer plan failed for model {}: it trains with one buffer each, {:.1f} MB at batch "
            "{} (right, but larger; an engine defect worth reporting, with `psrun model show`'s output)",
            model.name, static_cast<double>(use.unplanned_bytes) / 1e6, options.batch_size);
    return std::move(*created);
}

// The network's batch buffers: float or id inputs (the other span is empty), class labels or
// target vectors (as its loss reads them; the other is empty); an input read by a table keyed by
// raw ids (the primary input too) also gets that table's raw buffer (the data fills it, map_batch()
// the input's).
BatchView batch_view(nn::Network& network, SparseTables& sparse) {
    BatchView view{network.input(), network.input_ids(), network.labels(), network.targets(), {}};
    view.inputs_u64 = sparse.raw_ids(0, network.options().batch_size);
    for (std::size_t i = 1; i < network.model().inputs.size(); ++i)
        if (!network.model().fed_by_labels(i))
            view.columns.push_back(
                ColumnSpan{network.input(i), network.input_ids(i), sparse.raw_ids(i, network.options().batch_size)});
    return view;
}
}  // namespace

std::span<float> Trainer::network_grads(ParameterSet& grads) const {
    return grads.with_tail().first(static_cast<std::size_t>(network_->model().parameter_count));
}

Trainer::Trainer(const TrainerConfig& config, const LabeledImages& train, const LabeledImages& test)
    : Trainer(config,
              std::make_unique<MemorySource>(train, static_cast<std::size_t>(config.network.batch_size), config.seed,
                                             config.shard),
              std::make_unique<MemoryEvalSource>(test)) {}

Trainer::Trainer(const TrainerConfig& config, std::unique_ptr<BatchSource> train, std::unique_ptr<EvalSource> test)
    : config_(config),
      train_(std::move(train)),
      test_(std::move(test)),
      sparse_(required(config), config.sparse_tables, config.seed, config.raw_ids),
      params_(sparse_.dense_tensors(),
              sparse_.tail_floats(std::max<std::int64_t>(step_examples(config), config.eval_batch_size))),
      grads_(make_grads(params_.tensors(), params_.tail().size())),
      synthetic_(config.synthetic_compute_ms, config.synthetic_jitter, config.seed,
                 static_cast<std::uint32_t>(config.shard.index)),
      update_(config.optimizer, params_.tensors(), std::max(1, omp_get_max_threads())),
      augmenter_(config.augment, config.seed, static_cast<std::uint32_t>(config.shard.index)) {
    config_.network.forward_only = false;
    if (config_.accumulate_steps < 1) throw std::invalid_argument("TrainerConfig::accumulate_steps < 1");
    if (config_.augment.enabled() && !config_.model->image_input())
        throw UsageError("--augment: model " + config_.model->name + " does not take images (its input is " +
                         nn::to_string(config_.model->input().dims) + "): augmentation flips and shifts images");
    if (sparse_.empty()) {
        network_ = make_network(*config_.model, config_.network, params_.all(), grads_[0].all());
        nn::initialize_parameters(*config_.model, config.seed, params_.all());
        if (config_.augment.enabled()) {
            // Batches are drawn and augmented on a thread of their own while the step computes.
            const auto image = *config_.model->image_input();
            const auto batch = config_.network.batch_size;
            train_ = std::make_unique<PrefetchSource>(
                std::move(train_), batch_view(*network_, sparse_), static_cast<std::size_t>(batch),
                [this, image, batch](BatchView& view, std::uint64_t index) {
                    augmenter_.apply(view.inputs_f32, batch, image.channels, image.height, image.width, index);
                });
        }
        return;
    }
    // The local tables hold the distinct ids of all micro-batches of an update (step_batches.h).
    const nn::ModelDescription local = sparse_.local_model(step_examples(config_));
    const auto count = static_cast<std::size_t>(local.parameter_count);
    network_ =
        make_network(local, config_.network, params_.with_tail().first(count), grads_[0].with_tail().first(count));
    const auto& tensors = config_.model->tensors;
    for (std::size_t i = 0, dense = 0; i < tensors.size(); ++i)  // the tables start on psd
        if (!sparse_.is_sparse(i)) nn::initialize_tensor(*config_.model, i, config.seed, params_.tensor(dense++));
}

Trainer::~Trainer() { train_.reset(); }

void Trainer::load_batch() {
    const auto t0 = Clock::now();
    BatchView view = batch_view(*network_, sparse_);
    train_->next_batch(view);
    data_ms_ += ms_since(t0);
}

Result<StepInfo> Trainer::pull_rows(PsClient& client) {
    if (!batch_pending_) {
        load_step_batches();
        batch_pending_ = true;
        ++sparse_batches_;
        sparse_distinct_.resize(sparse_.tables().size());
        for (std::size_t k = 0; k < sparse_distinct_.size(); ++k) sparse_distinct_[k] += sparse_.tables()[k].distinct();
    }
    return pull_mapped_rows(client, false);
}

Result<StepInfo> Trainer::pull_mapped_rows(PsClient& client, bool lookup) {
    PulledRows rows;
    auto info = client.exchange(Exchange{.pulls = sparse_.requests(), .rows = &rows, .lookup = lookup});
    if (info) sparse_.install(rows, params_.tail());
    return info;
}

std::span<const RowGrads> Trainer::row_grads() {
    if (sparse_.empty()) return {};
    return sparse_.row_grads(grads().tail());
}

float Trainer::compute_gradients() {
    if (config_.synthetic_compute_ms > 0) {
        for (int k = 0; k < config_.accumulate_steps; ++k) synthetic_.run();
        grads().fill(1e-7f);  // real size and shape; small enough that the parameters barely move
        local_step_ += static_cast<std::uint64_t>(config_.accumulate_steps);
        return 0.0f;
    }
    float loss = micro_batch(0);
    if (config_.accumulate_steps > 1) loss = accumulate(loss);
    if (config_.optimizer.clip_global_norm > 0.0f) clip_gradients();
    return loss;
}

float Trainer::micro_batch(int k) {
    if (sparse_.empty()) {
        load_batch();
    } else {  // pull_rows() loaded and mapped the update's micro-batches
        if (k == 0 && !batch_pending_)
            throw std::logic_error("Trainer::compute_gradients: a sparse table's rows were not pulled");
        batch_pending_ = false;
        if (step_batches_) step_batches_->restore(*network_, k);
    }
    // A dropout mask per (seed, worker, micro-batch): workers never share masks.
    Rng rng(config_.seed ^ (0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(config_.shard.index)), local_step_++);
    return network_->train_step(rng.next());
}

void Trainer::clip_gradients() {
    const auto g = grads().all();
    std::vector<std::span<float>> pieces;
    for (const auto& t : params_.tensors())
        if (t.tensor_class != TensorClass::kState) pieces.push_back(g.subspan(t.offset, t.size));
    for (auto rows : sparse_.grad_rows(grads().tail()))  // the rows pushed beside the dense gradient (row_grads())
        pieces.push_back(rows);
    const GlobalNorm clip = clip_by_global_norm(pieces, config_.optimizer.clip_global_norm);
    last_grad_norm_ = clip.norm;
    if (clip.clipped) ++clipped_steps_;
}

void Trainer::swap_gradient_buffers() {
    if (external_grads_.size() == 1) external_grads_.clear();  // one view cannot alternate: own buffers
    if (external_grads_.empty() && grads_.size() < 2) grads_.emplace_back(params_.tensors(), params_.tail().size());
    current_grads_ = 1 - current_grads_;
    network_->set_gradient_buffer(network_grads(grad_buffer(current_grads_)));
}

void Trainer::use_gradient_memory(const std::vector<std::span<float>>& buffers) {
    external_grads_.clear();
    if (!buffers.empty() && !sparse_.empty())
        throw std::logic_error(
            "Trainer::use_gradient_memory: a sparse table's gradient rows need the trainer's own buffers");
    for (auto b : buffers) external_grads_.emplace_back(params_.tensors(), b);
    current_grads_ = 0;
    network_->set_gradient_buffer(network_grads(grad_buffer(0)));
}

void Trainer::apply_gradients() {
    const auto t0 = Clock::now();
    update_.apply(params_.all(), grads().all());
    ++global_step_;
    update_ms_ += ms_since(t0);
}

void Trainer::fetch_eval_rows(nn::Network& m, std::size_t valid) {
    PsClient* client = row_client_ ? row_client_() : nullptr;
    if (client == nullptr) throw std::logic_error("Trainer::evaluate: a sparse table needs set_row_client()");
    sparse_.map_batch([&m](std::size_t input) { return m.input_ids(input); }, static_cast<std::int64_t>(valid),
                      m.options().batch_size);
    // Only read: an evaluation creates, admits and evicts no row on psd (wire::kFlagLookup).
    if (auto info = pull_mapped_rows(*client, true); !info)
        throw std::runtime_error("evaluation: pulling the rows of sparse tables " + sparse_.names() + ": " +
                                 info.error().message);
}

EvalMetrics Trainer::evaluate() {
    if (!eval_network_) {
        nn::NetworkOptions options = config_.network;
        options.forward_only = true;
        const auto batch = static_cast<std::size_t>(config_.eval_batch_size);
        std::size_t size = test_->size() ? std::min(batch, test_->size()) : batch;
        // A graph loss is one value per batch: no batch may be padded, so the evaluation batch
        // divides the test set (its largest divisor up to eval_batch_size).
        if (config_.model->loss == nn::LossKind::kGraph && test_->size() > 0)
            while (test_->size() % size != 0) --size;
        options.batch_size = static_cast<std::int64_t>(size);
        if (sparse_.empty()) {
            eval_network_ = make_network(*config_.model, options, params_.all(), {});
        } else {
            const nn::ModelDescription local = sparse_.local_model(options.batch_size);
            eval_network_ = make_network(
                local, options, params_.with_tail().first(static_cast<std::size_t>(local.parameter_count)), {});
        }
    }
    nn::Network& m = *eval_network_;
    const std::size_t batch = static_cast<std::size_t>(m.options().batch_size);
    BatchView view = batch_view(m, sparse_);
    EvalAccumulator sums(config_.model->metric_loss(), config_.model->classes);
    const bool graph_loss = config_.model->loss == nn::LossKind::kGraph;
    const auto& heads = config_.model->heads;
    sums.set_heads(heads);
    test_->rewind();
    while (const std::size_t valid = test_->next(view, batch)) {
        if (!sparse_.empty()) fetch_eval_rows(m, valid);
        const float loss = m.forward(false);
        if (graph_loss) sums.add_loss(loss, valid);
        sums.add(m.outputs(), m.labels(), m.targets(), valid);
        // Each head against its target input, as the batch fed it.
        for (std::size_t k = 0; k < heads.size(); ++k) {
            const auto t = static_cast<std::size_t>(config_.model->input_index(heads[k].target));
            if (heads[k].kind == nn::HeadKind::kSoftmax) sums.add_head(k, m.head_outputs(k), m.input_ids(t), {}, valid);
            else sums.add_head(k, m.head_outputs(k), {}, m.input(t), valid);
        }
    }
    return sums.result();
}

}  // namespace psrun::worker
