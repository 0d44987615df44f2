// `psrun model show --ps K [--sparse-embedding NAME]`: where a model's tensors live in a job with K
// psd shards (common/tensor_layout.h compute_layout): the dense tensors sliced over the shards, a
// sparse table's rows r on shard r mod K or, when small, the whole table on one shard
// (docs/sparse.md), and each shard's floats and bytes with
// the optimizer slots psd keeps beside them. The sparse table is the one named, or the one workerd
// would make sparse by itself (workerd/sparse_tables.h kAutoSparseFloats).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workerd/nn/model_description.h"

namespace psrun::launcher {

// Prints the placement to stdout. Throws UsageError for a sparse table the model cannot have.
void print_placement(const nn::ModelDescription& model, std::uint32_t shards, const std::vector<std::string>& sparse);

}  // namespace psrun::launcher
