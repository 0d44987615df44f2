// Which tables of a checkpoint are keyed by raw 64-bit ids (trained with --raw-ids; docs/sparse.md
// "Raw ids"), as its manifest records them ("layout" "tensors": each tensor's "kind", "keyed rows"
// for such a table, and a rows tensor's "row_init": common/checkpointer.cpp), and the rows they
// hold (workerd/keyed_rows.h), for psrun eval, predict and export.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/tensor_layout.h"
#include "workerd/keyed_rows.h"
#include "workerd/nn/model_description.h"

namespace psrun::worker {

// "seed" of <model_dir>/summary.json (the run's --seed, written by the chief at the end), if any:
// mark_keyed_tables' fallback for a manifest without row initializers.
std::optional<std::uint64_t> recorded_run_seed(const std::string& model_dir);

// Marks in `tensors` (the model's wire tensors, model order) each table that `manifest` records
// as keyed rows: kind kKeyedRows, its row_init the manifest's, or for a manifest written before
// psrun recorded it, nn::table_row_init() of the model with `fallback_seed` (the run's --seed,
// from its summary.json). Returns their indices, ascending. Errors: kInvalidArgument naming
// `where` for a record that does not fit the model (another shape, an unknown initializer);
// kNotFound when a keyed table has no recorded initializer and `fallback_seed` is nullopt.
[[nodiscard]] Result<std::vector<std::size_t>> mark_keyed_tables(const nlohmann::json& manifest,
                                                                 const nn::ModelDescription& model,
                                                                 std::vector<TensorSpec>& tensors,
                                                                 std::optional<std::uint64_t> fallback_seed,
                                                                 const std::string& where);

// Checks --raw-ids `names` (embedding node or table names) against the keyed tables `keyed`
// (indices into model.tensors, from mark_keyed_tables): kUnsupported, saying what to do, for a
// keyed table no name gives ("give --raw-ids EMB, as in training"), a name whose table is not
// keyed in the checkpoint ("drop it"), and a name that is no embedding of the model.
[[nodiscard]] Result<void> check_raw_id_names(const nn::ModelDescription& model, const std::vector<std::size_t>& keyed,
                                              const std::vector<std::string>& names, const std::string& where);

// The embedding nodes reading the keyed tables `keyed`, in that order ("emb_i"): the names
// --raw-ids takes.
std::vector<std::string> keyed_embedding_names(const nn::ModelDescription& model,
                                               const std::vector<std::size_t>& keyed);

// Every keyed table of checkpoint directory `dir` (tensors[k] for k in `keyed`), its "param" rows
// or with `average` its "ema" rows. Errors as KeyedRows::load.
[[nodiscard]] Result<std::vector<KeyedRows>> load_keyed_tables(const std::string& dir,
                                                               const std::vector<TensorSpec>& tensors,
                                                               const std::vector<std::size_t>& keyed, bool average);

}  // namespace psrun::worker
