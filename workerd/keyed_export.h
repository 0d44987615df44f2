// What `psrun export` writes for a checkpoint with tables keyed by raw 64-bit ids (--raw-ids;
// docs/sparse.md "Raw ids", docs/models.md "Exporting"): each keyed table becomes an ordinary
// table of R + 1 rows in the ONNX graph (its embedding's vocabulary R + 1), rows 0..R-1 the R rows
// the checkpoint holds in ascending id order, row R zeros (the mean of every initializer psd draws
// rows from); beside the graph, its id map: a .npy of the R uint64 ids in row order (ascending,
// so numpy.searchsorted finds a row). Serving rule: id -> its index in the map; an id not in it ->
// row R. (psrun eval/predict of the checkpoint give such an id its own initial values instead,
// as psd does; the ONNX graph cannot draw them.)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workerd/keyed_rows.h"
#include "workerd/nn/model_description.h"

namespace psrun::worker {

struct KeyedExport {
    nn::ModelDescription model;  // each keyed table [R + 1, D], the offsets recomputed in model order
    std::vector<float> params;   // model.parameter_count floats
};

// The model and parameters to export: `dense` holds the dense tensors in model order (the keyed
// tables left out, as load_checkpoint_parameters gives them), `tables` the keyed tables' rows.
// Throws std::invalid_argument when `dense` does not fit the model or a table is not one of its
// [V, D] tensors.
KeyedExport keyed_export_model(const nn::ModelDescription& model, std::span<const float> dense,
                               std::span<const KeyedRows> tables);

// The bytes of a version 1.0 .npy file of a little-endian uint64 vector ('<u8', shape (n,)).
std::string npy_u64_bytes(std::span<const std::uint64_t> values);

// The id map file of embedding `node` beside ONNX file `onnx_path`: "<dir>/<stem>.<node>.ids.npy"
// (the node's name with characters other than A-Z a-z 0-9 _ - . as '_').
std::string keyed_ids_path(const std::string& onnx_path, const std::string& node);

// The "psrun.keyed_tables" metadata entry's value: per table {"table", "embedding", "input",
// "rows", "default_row", "ids_file", "row_init"} (ids_file relative to the ONNX file's directory).
nlohmann::json keyed_export_metadata(const nn::ModelDescription& model, std::span<const KeyedRows> tables,
                                     const std::vector<std::string>& ids_files);

inline constexpr const char* kKeyedTablesKey = "psrun.keyed_tables";

}  // namespace psrun::worker
