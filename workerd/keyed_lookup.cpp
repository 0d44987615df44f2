#include "workerd/keyed_lookup.h"

#include <algorithm>

#include "common/result.h"

namespace psrun::worker {

KeyedLookup::KeyedLookup(const nn::ModelDescription& model, const std::vector<std::string>& names,
                         std::span<const KeyedRows> tables)
    // The seed only draws SparseTable's own initializer, unused here: the rows come from `tables`.
    : sparse_(model, {}, 0, RawIdTables{names, RowPolicy{}}) {
    for (const auto& t : sparse_.tables()) {
        const auto it =
            std::find_if(tables.begin(), tables.end(), [&](const KeyedRows& r) { return r.table() == t.name(); });
        if (it == tables.end())
            throw UsageError("--raw-ids " + t.node() + ": the checkpoint does not hold table " + t.name() +
                             " keyed by raw ids: drop it from --raw-ids");
        if (static_cast<std::int64_t>(it->width()) != t.width())
            throw UsageError("keyed table " + t.name() + ": the checkpoint's rows have " + std::to_string(it->width()) +
                             " floats, the model's " + std::to_string(t.width()));
        rows_.push_back(&*it);
    }
    for (const auto& r : tables)
        if (std::none_of(sparse_.tables().begin(), sparse_.tables().end(),
                         [&](const SparseTable& t) { return t.name() == r.table(); }))
            throw UsageError("the checkpoint holds table " + r.table() +
                             " keyed by raw ids: give its embedding with "
                             "--raw-ids, as in training");
}

void KeyedLookup::map_batch(const std::function<std::span<std::int32_t>(std::size_t input)>& ids_of,
                            std::int64_t examples, std::int64_t batch, std::span<float> params) {
    if (offsets_batch_ != batch) {
        const nn::ModelDescription local = sparse_.local_model(batch);
        offsets_.clear();
        for (const auto& t : sparse_.tables())
            offsets_.push_back(static_cast<std::size_t>(local.tensors[t.tensor()].offset));
        offsets_batch_ = batch;
    }
    sparse_.map_batch(ids_of, examples, batch);
    const auto requests = sparse_.requests();
    for (std::size_t k = 0; k < rows_.size(); ++k) {
        const auto keys = requests[k].keys;
        found_ += rows_[k]->gather(keys, params.subspan(offsets_[k]));
        distinct_ += keys.size();
    }
}

}  // namespace psrun::worker
