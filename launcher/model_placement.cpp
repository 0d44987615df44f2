#include "launcher/model_placement.h"

#include <cstdio>

#include "common/result.h"
#include "common/tensor_layout.h"
#include "workerd/sparse_tables.h"

namespace psrun::launcher {

namespace {

std::string megabytes(std::uint64_t floats) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(floats) * 4 / 1e6);
    return text;
}

}  // namespace

void print_placement(const nn::ModelDescription& model, std::uint32_t shards, const std::vector<std::string>& sparse) {
    std::vector<std::string> names = sparse;
    const bool automatic = names.empty();
    if (automatic) names = worker::SparseTables::automatic(model, worker::kAutoSparseFloats, 1);
    const worker::SparseTables tables(model, names, 1);
    auto layout = compute_layout(tables.wire_tensors(), shards);
    if (!layout) throw UsageError("--ps " + std::to_string(shards) + ": " + layout.error().message);
    std::printf("\nplacement on %u psd shard%s (slots: 1 more copy with momentum or Adagrad, 2 with Adam):\n", shards,
                shards == 1 ? "" : "s");
    if (tables.empty()) {
        std::printf("  every tensor dense, %zu floats sliced over the shards\n", layout->total);
    } else {
        for (std::size_t k = 0; k < tables.tables().size(); ++k) {
            const auto& t = tables.tables()[k];
            const RowTable& placed = layout->tables.at(k);
            const std::string where = placed.whole() ? "whole on shard " + std::to_string(placed.home) + " (small)"
                                      : t.keyed()    ? "each id on shard hash(id) mod " + std::to_string(shards)
                                                     : "row r on shard r mod " + std::to_string(shards);
            std::printf("  %s [%lld x %lld]: %s table%s, %s, pulled and pushed by the batch's ids of %s\n",
                        t.name().c_str(), static_cast<long long>(t.rows()), static_cast<long long>(t.width()),
                        t.keyed() ? "keyed" : "sparse", automatic ? " (automatic: over 256 MiB)" : "", where.c_str(),
                        model.inputs.at(t.input()).name.c_str());
        }
        std::printf("  the other tensors dense, %zu floats sliced over the shards\n", layout->total);
    }
    for (std::uint32_t s = 0; s < shards; ++s) {
        std::uint64_t rows = 0;
        std::string each;  // per table, with several
        for (const auto& t : layout->tables) {
            const std::uint64_t floats = t.rows_on(s, shards) * t.width;
            rows += floats;
            if (layout->tables.size() > 1 && floats > 0)  // a table placed whole elsewhere: not named
                each += (each.empty() ? "" : ", ") + model.tensors.at(t.tensor).name + " " + megabytes(floats);
        }
        std::printf("  shard %u: dense %zu floats (%s)", s, layout->shard_size(s),
                    megabytes(layout->shard_size(s)).c_str());
        if (!layout->tables.empty())
            std::printf(", rows %llu floats (%s)", static_cast<unsigned long long>(rows), megabytes(rows).c_str());
        if (!each.empty()) std::printf(": %s", each.c_str());
        std::printf("\n");
    }
}

}  // namespace psrun::launcher
