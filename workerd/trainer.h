// One worker's training state: data, sampler, network, parameters and gradients. The network is
// built from a model description (workerd/nn/network.h); the parameters start from the
// description's initializers. A step is split in two so that the distributed mode can replace
// the local update with push/pull to psd:
//   compute_gradients()  fills the next batch, runs forward+backward, writes grads()
//   apply_gradients()    standalone only: the local optimizer updates params() from grads()
//                        (state tensors: params -= grads, workerd/local_update.h)
// With sparse tables (TrainerConfig::sparse_tables, workerd/sparse_tables.h) the tables are not in
// params(): pull_rows() loads the next batch and pulls every table's rows from psd (one exchange)
// before compute_gradients(), and row_grads() (one entry per table) are pushed beside grads().
// Gradient accumulation (TrainerConfig::accumulate_steps N > 1): compute_gradients() runs N
// micro-batches of network.batch_size and leaves in grads() what one batch of N x batch_size
// would give: the mean of their gradients when the model's loss is a mean
// (LossReduction::kMean), their sum when it is a sum. So an update is one push (or one
// apply_gradients()) whatever N is, and the schedule counts updates. BatchNorm differs from the
// large batch as in PyTorch: each micro-batch normalizes with its own statistics, and the
// moving statistics (state tensors) move once per micro-batch: between micro-batches params()
// take each delta, and at the end params() are back where they were and grads() holds their
// whole delta (start - after N micro-batches), which psd or apply_gradients() subtracts as
// before. With sparse tables, pull_rows() draws all N micro-batches first and maps each table's
// ids of all of them together (workerd/step_batches.h): the local table holds their union
// (capacity N x batch x ids per example, at most V), its rows are pulled once, every
// micro-batch trains on them, and the gradient rows accumulate and scale as the dense gradient.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/optimizer.h"
#include "workerd/augment.h"
#include "workerd/data/batch_source.h"
#include "workerd/data/labeled_images.h"
#include "workerd/data/sampler.h"
#include "workerd/eval_metrics.h"
#include "workerd/local_update.h"
#include "workerd/nn/model_description.h"
#include "workerd/nn/network.h"
#include "workerd/parameter_set.h"
#include "workerd/sparse_tables.h"
#include "workerd/step_batches.h"
#include "workerd/synthetic_compute.h"

namespace psrun::worker {

struct TrainerConfig {
    std::shared_ptr<const nn::ModelDescription> model;  // required
    nn::NetworkOptions network;                         // batch size, precision, hand kernels (forward_only ignored)
    OptimizerConfig optimizer;
    std::uint64_t seed = 1;  // weights, shuffling and dropout
    ShardSpec shard;
    int eval_batch_size = 500;
    // > 0: compute_gradients() sleeps this long and writes a constant gradient instead of running
    // the network (scale tests: TrainOptions::synthetic_compute_ms).
    double synthetic_compute_ms = 0;
    // With synthetic compute: a random extra delay per step, seeded by (seed, shard.index)
    // (workerd/synthetic_compute.h; TrainOptions::synthetic_compute_jitter).
    ComputeJitter synthetic_jitter;
    // --sparse-embedding: the embedding tables that live on psd (workerd/sparse_tables.h).
    std::vector<std::string> sparse_tables;
    // --raw-ids, --admit-after, --admit-probability, --evict-after: tables keyed by raw ids.
    RawIdTables raw_ids;
    // --augment: applied to each training batch (image models only; workerd/augment.h).
    AugmentSpec augment;
    // --accumulate-steps: micro-batches of network.batch_size per compute_gradients() (>= 1).
    int accumulate_steps = 1;
};

class Trainer {
  public:
    // Trains on batches from `train` and evaluates on `test` (workerd/data/batch_source.h).
    // Throws UsageError when the network cannot be built for this configuration (e.g. bf16 on a
    // CPU without it), naming the layer.
    Trainer(const TrainerConfig& config, std::unique_ptr<BatchSource> train, std::unique_ptr<EvalSource> test);
    // In-memory data drawn through the Sampler (workerd/data/memory_source.h); `train` and
    // `test` must outlive the trainer.
    Trainer(const TrainerConfig& config, const LabeledImages& train, const LabeledImages& test);
    // Stops the batch thread (with --augment) before the members it uses go.
    ~Trainer();

    // Loads the next batch of this worker's shard (unless pull_rows() did), computes the loss and
    // writes the gradients into grads() (and the sparse table's rows' into row_grads()). Returns
    // the batch's mean loss. REQUIRES with a sparse table: pull_rows() succeeded since the last call.
    // With OptimizerConfig::clip_global_norm C > 0, the trainable tensors' gradients and the
    // sparse table's gradient rows are then scaled by min(1, C / ||g||), the norm over all of them
    // (tf.clip_by_global_norm; workerd/global_norm.h) and, with accumulation, over the
    // accumulated gradient (as torch users clip after accumulating); state tensors' deltas are
    // left alone, and a non-finite norm leaves the gradient as it is (psd rejects it).
    // With accumulation (above) it draws accumulate_steps batches and returns their mean loss
    // (their sum with a summed loss).
    float compute_gradients();
    // Steps whose gradient --clip-global-norm scaled down, and the global norm of the last one
    // (before clipping; 0 without clipping).
    std::uint64_t clipped_steps() const { return clipped_steps_; }
    double last_grad_norm() const { return last_grad_norm_; }
    // A sparse table: loads the next batch (once: a failed pull keeps it for the next try) and
    // pulls its distinct ids' rows from psd through `client` into the local table.
    [[nodiscard]] Result<StepInfo> pull_rows(PsClient& client);
    bool sparse() const { return !sparse_.empty(); }
    const SparseTables& sparse_tables() const { return sparse_; }
    // The sparse table's gradient rows of the last compute_gradients() (empty without one).
    std::span<const RowGrads> row_grads();
    // Training batches mapped by pull_rows() and the distinct ids of table k (sparse_tables().tables()[k]), summed.
    std::uint64_t sparse_batches() const { return sparse_batches_; }
    std::uint64_t sparse_distinct_ids(std::size_t k) const {
        return k < sparse_distinct_.size() ? sparse_distinct_[k] : 0;
    }
    // Where evaluate() pulls a sparse table's rows from (the client of the moment).
    void set_row_client(std::function<PsClient*()> client) { row_client_ = std::move(client); }
    // params -= optimizer(grads); counts a global step.
    void apply_gradients();
    // The test set under the current parameters (no dropout): accuracy, MSE/MAE or F1 as the
    // model's loss calls for (workerd/eval_metrics.h).
    EvalMetrics evaluate();

    ParameterSet& params() { return params_; }
    // The buffer the last compute_gradients() wrote (the next one writes it again unless
    // swap_gradient_buffers() was called in between).
    ParameterSet& grads() { return grad_buffer(current_grads_); }
    // Double buffering for a worker that sends a gradient while computing the next: the
    // following compute_gradients() writes the other buffer, leaving grads() as it is (the
    // second buffer is allocated at the first call). Cheap: the model's memories are rebound.
    void swap_gradient_buffers();
    // Makes compute_gradients() write into `buffers` (1, or 2 to swap between; e.g. a PsClient's
    // shared-memory regions, which then travel without a copy) instead of the trainer's own
    // buffers; an empty list goes back to those. REQUIRES: each span is params().size() floats,
    // 64-byte aligned, alive until the next call or the trainer's end.
    void use_gradient_memory(const std::vector<std::span<float>>& buffers);
    nn::Network& network() { return *network_; }
    const nn::ModelDescription& model() const { return *config_.model; }
    std::uint64_t global_step() const { return global_step_; }
    // The training data stream (workerd/preemption.h: resuming moves it to where it was).
    BatchSource& data() { return *train_; }
    void set_global_step(std::uint64_t step) { global_step_ = step; }
    // Milliseconds spent in compute_gradients()'s wait for the batch (BatchSource::next_batch)
    // and in apply_gradients().
    double data_ms() const { return data_ms_; }
    double update_ms() const { return update_ms_; }

  private:
    TrainerConfig config_;
    std::unique_ptr<BatchSource> train_;
    std::unique_ptr<EvalSource> test_;
    SparseTables sparse_;  // before params_: it lays the buffer out
    ParameterSet params_;
    std::vector<ParameterSet> grads_;           // 1, or 2 once swap_gradient_buffers() was called
    std::vector<ParameterSet> external_grads_;  // views set by use_gradient_memory(): used when not empty
    std::size_t current_grads_ = 0;
    ParameterSet& grad_buffer(std::size_t i) { return external_grads_.empty() ? grads_[i] : external_grads_[i]; }
    std::unique_ptr<nn::Network> network_;
    std::unique_ptr<nn::Network> eval_network_;  // created at the first evaluate()
    SyntheticCompute synthetic_;                 // used when config_.synthetic_compute_ms > 0
    LocalUpdate update_;  // apply_gradients(): optimizer on trainable tensors, params -= grads on state ones
    std::uint64_t global_step_ = 0;
    std::uint64_t local_step_ = 0;
    double data_ms_ = 0;
    double update_ms_ = 0;
    bool batch_pending_ = false;
    std::uint64_t clipped_steps_ = 0;
    double last_grad_norm_ = 0;
    void clip_gradients();
    // Micro-batch k's (0 <= k < accumulate_steps) forward and backward into the network's
    // gradient buffer; its loss. Without sparse tables it loads the next batch; with them it
    // trains on the batch pull_rows() loaded (micro-batch k of step_batches_ when accumulating).
    float micro_batch(int k);
    // pull_rows(): loads the update's batch (all its micro-batches) and maps the tables' ids.
    void load_step_batches();
    std::unique_ptr<StepBatches> step_batches_;  // accumulating with sparse tables: the update's micro-batches
    // Micro-batches 2..N after the first wrote grads() (see the header comment); the loss of all.
    float accumulate(float first_loss);
    std::vector<ParameterSet> scratch_;  // accumulation: the buffer micro-batches 2..N write (0 or 1)
    std::vector<float> state_start_;     // accumulation: the state tensors before the first micro-batch
    std::uint64_t sparse_batches_ = 0;
    std::vector<std::uint64_t> sparse_distinct_;  // per table
    std::function<PsClient*()> row_client_;
    Augmenter augmenter_;
    void load_batch();
    // The part of a gradient buffer the training network writes (the tensors and its local rows).
    std::span<float> network_grads(ParameterSet& grads) const;
    void fetch_eval_rows(nn::Network& m, std::size_t valid);
    // Pulls the rows of the last map_batch() into the local table (training; evaluation with
    // `lookup`: psd only reads them).
    [[nodiscard]] Result<StepInfo> pull_mapped_rows(PsClient& client, bool lookup);
};

}  // namespace psrun::worker
