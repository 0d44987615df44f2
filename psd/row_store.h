// psd's part of the sparse tables (rows tensors, docs/protocol.md "Sparse tables"). For each
// table of the layout this shard holds the rows r with r mod K == shard, row r at index r / K of
// one contiguous [local rows, width] array, with the optimizer's slots of the same shape and the
// table's update count. Memory: exactly those arrays (this shard's 1/K of the rows and their
// slots); replies gather-copy the rows they send, so no table is ever copied whole.
//
// Optimizers (TF 1.x's sparse kernels, common/optimizer.h UpdateKernel): a pushed row is updated
// exactly as the same row of a dense tensor would be with the same gradient; rows not pushed are
// untouched, slots included. So SGD and Adagrad equal their dense updates (a zero gradient
// changes nothing there), while momentum and Adam are "lazy": a row's slots decay only when the
// row is pushed. Adam's step count t is the table's update count, advanced by every update of
// the shard (begin_update()), whether or not it touched the table: TF's LazyAdamOptimizer, whose
// beta powers advance once per apply for all variables. A row first pushed at step 1000 thus
// gets lr * sqrt(1 - b2^1000) / (1 - b1^1000), not the larger bias-corrected rate of t = 1.
// LAMB (common/lamb.h) takes its trust ratio per pushed row: the row is the unit psd sees (a row's
// update is one UpdateKernel call, LambKernel::whole), so it moves as a dense [1, width] tensor
// would, not as its row of the whole [num_rows, width] table, whose norms no shard knows.
//
// Moving average (--ema-decay D > 0, psd/weight_average.h): each table has an array of averages
// as large as its rows and, per local row, the update count its average is current at. It equals
// the dense average of the same tensor (copied at the first update, then ema += (1 - D)(p - ema)
// after every update of the shard) at O(rows pushed) cost: a row not pushed for k updates keeps
// its value w, so its average is brought up to date lazily, ema = w + D^k (ema - w) (in double),
// before apply() changes the row and for every row in materialize(); then the update's own term.
// A row's average starts as its initial values when it is created. Without --ema-decay neither
// array exists. A row must be pushed at most once per update (ids strictly ascending).
// Keyed tables (RowTable::keyed, raw 64-bit ids; docs/sparse.md "Raw ids"): the arrays hold the
// shard's capacity in slots (zero pages: memory only for slots used) and a RowIndex (psd/row_index.h)
// says which ids are rows, at which slot. gather() counts an occurrence of each id: the policy may
// admit it then (a slot gets the id's initial values, by id, and fresh slots, evicting the least
// recently updated row when full); an id that is not a row reads as its initial values, not stored.
// apply() updates the ids that are rows and drops the others' gradients (counted). begin_update()
// evicts rows idle longer than the policy's evict_after. A row evicted and admitted again starts
// afresh.
// Owned and used by the server's poll-loop thread only (a ThreadTeam may split init()), except
// read_snapshot() (see there).
#pragma once

#include <memory>

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/optimizer.h"
#include "common/tensor_layout.h"
#include "common/thread_team.h"
#include "psd/row_index.h"
#include "psd/row_snapshot.h"
#include "psd/zero_pages.h"

namespace psrun::psd {

class RowStore {
  public:
    RowStore(const ShardLayout& layout, std::uint32_t shard, const std::vector<TensorSpec>& tensors);

    std::size_t size() const { return tables_.size(); }  // tables, in layout.tables order
    const RowTable& table(std::size_t t) const { return tables_[t].spec; }
    std::uint64_t local_rows(std::size_t t) const { return tables_[t].local_rows; }
    std::uint32_t shard() const { return shard_; }
    std::uint32_t num_shards() const { return num_shards_; }
    const OptimizerConfig& config() const { return config_; }

    // Reserves every table's rows and slots for `config`, every row still to be created (values
    // from the tables' initializers by global row id, slots as Optimizer starts them, at first
    // use); update counts 0.
    void init(const OptimizerConfig& config);
    // Creates every row not created yet and brings every row's moving average up to date (before
    // a checkpoint reads values(), slots() and average()).
    // `team` (may be null) splits the work.
    void materialize(ThreadTeam* team);
    // What a checkpoint writes of table t, without materialize(): floats [first, first +
    // out.size()) of its `part`, as materialize() would leave them (a row not created yet reads
    // as its initial values and fresh slots; an average not current is brought up to date in
    // `out`). Changes nothing, so a forked checkpoint writer copies no page of the table and
    // creates none. A keyed table's arrays read as they are (catch_up_keyed() first).
    enum class Part { kValues, kSlot0, kSlot1, kAverage };
    void read(std::size_t t, Part part, std::uint64_t first, std::span<float> out) const;
    // materialize() for the keyed tables only: their rows' averages brought up to date.
    void catch_up_keyed();

    // A snapshot of the tables (psd/row_snapshot.h): from begin_snapshot() on, the first change of
    // each block of rows (values, slots, average, created bits, a keyed table's ids and last
    // updates) copies what a checkpoint read of it needs, and read_snapshot() (from one other
    // thread) reads every table as read() would have at begin_snapshot() (a keyed table's averages
    // brought up to date, as catch_up_keyed() would), read_snapshot_keys() a keyed table's id map
    // (its rows in slot order), while this thread goes on with apply(), gather() and
    // begin_update(). `cursor` holds the block being read: one per tensor read, parts and blocks in
    // order (a checkpoint file's order: values, slots, average, then the keys). end_snapshot() once
    // that thread is done. REQUIRES: nothing else changes the store meanwhile.
    struct SnapshotCursor {
        std::uint64_t block = ~std::uint64_t{0};
        std::vector<float> rows;    // that block's rows of the part read (the keys: entries as floats)
        std::uint64_t emitted = 0;  // the keys: floats given out so far
    };
    // `only` (one BlockSet per table, as dirty() gives them): the snapshot keeps only those blocks
    // (a differential checkpoint reads no other); null: every block.
    using BlockSet = std::vector<std::uint64_t>;
    void begin_snapshot(const std::vector<BlockSet>* only = nullptr);
    void end_snapshot();
    // Which blocks of RowSnapshot::kBlockRows local rows of table t changed (a value, slot, average,
    // created bit or id) since the last take_dirty() (or init(), allocate()): bit b % 64 of word
    // b / 64 is block b. What a differential checkpoint writes (docs/sparse.md "Checkpoints").
    // take_dirty() returns every table's and starts them afresh; merge_dirty() ORs returned ones
    // back (their write failed). dirty_epoch() changes with every init(), allocate() and restore().
    const BlockSet& dirty(std::size_t t) const { return tables_[t].dirty; }
    std::vector<BlockSet> take_dirty();
    void merge_dirty(const std::vector<BlockSet>& dirty);
    std::uint64_t dirty_epoch() const { return dirty_epoch_; }
    bool snapshotting() const { return snapshotting_; }
    void read_snapshot(std::size_t t, Part part, std::uint64_t first, std::span<float> out,
                       SnapshotCursor& cursor) const;
    // Keyed table t's id map at begin_snapshot(): floats [first, first + out.size()) of its rows'
    // encoded entries (psd/shard_checkpoint_rows.h encode_keyed_entries()), slot order; keys_rows(t)
    // entries in all. False when the map read has another size (a bug: the write must stop).
    [[nodiscard]] bool read_snapshot_keys(std::size_t t, std::uint64_t first, std::span<float> out,
                                          SnapshotCursor& cursor) const;
    std::uint64_t snapshot_rows(std::size_t t) const { return tables_[t].snapshot_rows; }
    // Bytes the snapshot's copies take now (0 without one).
    std::uint64_t snapshot_bytes() const;
    // Rows created so far, all tables.
    std::uint64_t rows_created() const;
    // Allocates rows and fresh slots for `config`, every row counted as created, without
    // initialising the values (a checkpoint load fills them); update counts 0. With `lazy` (one
    // flag per table), a flagged vocabulary table starts with no row created, as after init():
    // the load marks each row it fills (mark_created()) and the others get their initial values
    // at first use (a checkpoint that lists only the blocks holding rows, common/row_delta.h).
    void allocate(const OptimizerConfig& config, const std::vector<bool>* lazy = nullptr);
    // A checkpoint load filled local row i of vocabulary table t (values and slots): it is created.
    void mark_created(std::size_t t, std::uint64_t i) { tables_[t].created[i >> 6] |= std::uint64_t{1} << (i & 63); }
    // The blocks of RowSnapshot::kBlockRows local rows of table t that hold a created row, as
    // dirty() gives blocks: what a whole checkpoint of a vocabulary table lists (every other row
    // reads as its initial values and fresh slots).
    BlockSet created_blocks(std::size_t t) const;
    // INIT "restored": keeps values and update counts and adopts `config`; slots start fresh only
    // if the optimizer kind changed. An average that stays on keeps its values; one turned on
    // starts from the rows (as WeightAverage::retune()).
    void restore(const OptimizerConfig& config);
    // Fresh slots for table t (Adagrad: the initial accumulator; others 0).
    void reset_slots(std::size_t t);

    // One update of the shard: every table's update count advances (see the header comment).
    void begin_update();
    // Rows `ids` of table t (global ids owned by this shard, checked by the caller) are updated
    // with `grads` (ids.size() x width floats), at the table's current update count.
    void apply(std::size_t t, std::span<const std::uint32_t> ids, std::span<const float> grads);
    // Copies rows `ids` of table t (owned by this shard) to `out` (ids.size() x width floats),
    // creating those not created yet; with `lookup` (an evaluation's pull, wire::kFlagLookup) it
    // creates nothing: a row not created yet reads as its initial values.
    void gather(std::size_t t, std::span<const std::uint32_t> ids, float* out, bool lookup = false);
    // The same for a keyed table's raw ids (see the header comment): apply() updates the ids that
    // are rows, gather() counts an occurrence of each (admitting it when the policy says so); with
    // `lookup` it only reads (an id that is not a row reads as its initial values): nothing is
    // counted, admitted or evicted.
    void apply(std::size_t t, std::span<const std::uint64_t> keys, std::span<const float> grads);
    void gather(std::size_t t, std::span<const std::uint64_t> keys, float* out, bool lookup = false);
    // A keyed table's index (null for a vocabulary table) and the gradients apply() dropped
    // because their id was not a row.
    const RowIndex* index(std::size_t t) const { return tables_[t].index.get(); }
    std::uint64_t dropped(std::size_t t) const { return tables_[t].dropped; }
    // Checkpoint load of a keyed table, after allocate(): its rows are `entries` (their slots'
    // values, slots and averages loaded by the caller). std::invalid_argument on a bad entry.
    void restore_index(std::size_t t, std::span<const RowIndex::Entry> entries);

    // Checkpoint access: table t's rows, its slots (slot_count(kind) arrays, each as large as the
    // rows) and update count.
    std::span<float> values(std::size_t t) { return tables_[t].values; }
    std::span<const float> values(std::size_t t) const { return {tables_[t].values.data(), tables_[t].values.size()}; }
    std::vector<std::span<float>> slots(std::size_t t);
    std::vector<std::span<const float>> slots(std::size_t t) const;
    std::uint64_t updates(std::size_t t) const { return tables_[t].updates; }
    void set_updates(std::size_t t, std::uint64_t updates) { tables_[t].updates = updates; }

    // The moving average of table t's rows (empty without --ema-decay); valid for every row after
    // materialize(). A checkpoint load fills it after allocate(), then calls start_average(t).
    std::span<float> average(std::size_t t) { return tables_[t].ema; }
    std::span<const float> average(std::size_t t) const { return {tables_[t].ema.data(), tables_[t].ema.size()}; }
    bool averaging() const { return config_.ema_decay > 0.0f; }
    // After a load of table t's rows and update count: its average was loaded (`loaded`: it has
    // started) or restarts as a copy of the rows (the next update copies them again).
    void start_average(std::size_t t, bool loaded);

    std::size_t floats() const;          // row values held
    std::size_t slot_floats() const;     // optimizer slots held
    std::size_t average_floats() const;  // moving averages held

  private:
    using Floats = ZeroPages<float>;
    struct Table {
        RowTable spec;
        RowInit init;
        std::string name;          // the tensor's: its --param-group
        OptimizerConfig resolved;  // config_.for_tensor(name, 2), set with config_ (set_config)
        std::uint64_t local_rows = 0;
        Floats values, slot0, slot1;
        Floats ema;                          // the moving average (--ema-decay), as values
        ZeroPages<std::uint64_t> ema_at;     // per local row: the update count ema is current at
        std::vector<std::uint64_t> created;  // bit i: local row i has its initial values and slots
        std::uint64_t updates = 0;
        std::unique_ptr<RowIndex> index;        // keyed tables: id -> slot (the local row)
        RowPolicy policy;                       // keyed tables
        std::uint64_t dropped = 0;              // keyed tables: gradients of ids that were not rows
        std::unique_ptr<RowSnapshot> snapshot;  // while a snapshot is taken (begin_snapshot())
        std::uint64_t snapshot_updates = 0;     // the update count at begin_snapshot()
        std::uint64_t snapshot_rows = 0;        // keyed: its rows then
        std::uint64_t snapshot_used = 0;        // keyed: slots [0, used) had held a row then
        mutable BlockSet dirty;                 // see dirty()
    };
    // Before local row i of `table` changes: its block marked dirty and saved for the snapshot, if
    // one is taken.
    static void keep_for_snapshot(const Table& table, std::uint64_t i) {
        const std::uint64_t block = i / RowSnapshot::kBlockRows, bit = std::uint64_t{1} << (block & 63);
        // Atomic: materialize()'s threads share a word (64 blocks); set once, read nearly always.
        std::atomic_ref<std::uint64_t> word(table.dirty[block >> 6]);
        if (!(word.load(std::memory_order_relaxed) & bit)) word.fetch_or(bit, std::memory_order_relaxed);
        if (table.snapshot) save_block(table, block);
    }
    static std::uint64_t next_dirty_epoch();
    static void clear_dirty(Table& table) {
        table.dirty.assign((table.local_rows + 64 * RowSnapshot::kBlockRows - 1) / (64 * RowSnapshot::kBlockRows), 0);
    }
    static void save_block(const Table& table, std::uint64_t block);
    static void index_changing(void* table, std::uint32_t slot);  // RowIndex::ChangeHook
    // The snapshot's parts of a table: values, its optimizer slots, its average; their arrays.
    struct PartArrays {
        std::array<const float*, 4> at{};
        std::size_t count = 0;
    };
    static PartArrays part_arrays(const Table& table);
    static std::size_t part_index(const Table& table, Part part);
    // Block `block` of part `p` (`part`) of table t's snapshot, as read() would have read it.
    void read_snapshot_block(const Table& table, Part part, std::size_t p, std::uint64_t block,
                             std::vector<float>& rows) const;
    // Adopts `config` and resolves each table's (its --param-group) once, not per update.
    void set_config(const OptimizerConfig& config);
    // Gives local row i of `table` its initial values and fresh slots unless it has them.
    void create(Table& table, std::uint64_t i) const {
        if (!(table.created[i >> 6] >> (i & 63) & 1))
            create_row(table, i, table.spec.global_row(i, shard_, num_shards_));
    }
    // `id`: the row's id for its initial values (a keyed table's raw id; else the row).
    void create_row(Table& table, std::uint64_t i, std::uint64_t id) const;
    // A fresh index for keyed table `table` (none for a vocabulary table).
    void reset_index(Table& table) const;
    // Table t's average arrays for config_ (none when off), every created row's average a copy of
    // its values, current at the table's update count; the next update copies (not started).
    void reset_average(std::size_t t);
    // D^k for the last k asked (rows not pushed since the last checkpoint share one k): one pow()
    // per distinct k in a row, not per row. One per thread.
    struct DecayPower {
        std::uint64_t k = 0;
        double factor = 1.0;
    };
    // Local row i's average brought to update count `to` (its value unchanged since ema_at).
    void catch_up(Table& table, std::uint64_t i, std::uint64_t to, DecayPower& power) const;
    // The average `ema` of a row held at values `w` for the k updates `power` is of, into `out`
    // (may be `ema`): w + D^k (ema - w), in double.
    static void decay_toward(const float* w, const float* ema, const DecayPower& power, std::size_t width, float* out);
    DecayPower power_for(std::uint64_t k, DecayPower power) const;
    // A row that read() derives rather than copies, into `row`: as create_row() would make it when
    // not `created`, else its average brought to `updates` when behind (`values`, `ema`: the row's,
    // `ema_at` its average's update count). False when the stored row is what it reads as.
    bool derived_row(const Table& table, Part part, std::uint64_t i, bool created, const float* values,
                     const float* ema, std::uint64_t ema_at, std::uint64_t updates, DecayPower& power,
                     float* row) const;
    // Every created row's average brought to the table's update count (before the decay changes).
    void catch_up_all();
    // Folds local row i's new values into its average at the current update (copies on the first).
    void fold(Table& table, std::uint64_t i) const;
    // One pushed row: local row (or keyed slot) i updated by `kernel` with gradient `grad`
    // (width floats), its average caught up before and folded after (--ema-decay).
    void update_row(Table& table, std::uint64_t i, const float* grad, const UpdateKernel& kernel,
                    DecayPower& power) const;
    std::uint32_t shard_;
    std::uint32_t num_shards_;
    OptimizerConfig config_;
    std::vector<Table> tables_;
    bool ema_started_ = false;  // an update has been folded into the averages (else: copy)
    bool ema_copy_ = false;     // this update's apply() copies rows into the averages
    bool snapshotting_ = false;
    std::uint64_t dirty_epoch_ = 0;
};

}  // namespace psrun::psd
