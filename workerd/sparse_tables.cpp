#include "workerd/sparse_tables.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "common/result.h"

namespace psrun::worker {

namespace {

// The embedding node `name` names (its own name or its table's), or nullptr.
const nn::Node* find_embedding(const nn::ModelDescription& model, const std::string& name) {
    for (const auto& n : model.nodes)
        if (n.op == "embedding" && (n.name == name || n.inputs.at(n.data_inputs) == name)) return &n;
    return nullptr;
}

std::string embedding_list(const nn::ModelDescription& model) {
    std::string known;
    for (const auto& n : model.nodes)
        if (n.op == "embedding")
            known += (known.empty() ? "" : ", ") + n.name + " (table " + n.inputs.at(n.data_inputs) + ")";
    return known;
}

[[noreturn]] void unknown_embedding(const char* option, const std::string& name, const nn::ModelDescription& model) {
    const std::string known = embedding_list(model);
    throw UsageError(fmt::format("{} {}: no embedding of model {} has that name or table{}", option, name, model.name,
                                 known.empty() ? " (it has no embedding)" : "; its embeddings: " + known));
}

}  // namespace

std::vector<std::string> SparseTables::automatic(const nn::ModelDescription& model, std::int64_t min_floats,
                                                 std::uint64_t seed) {
    std::vector<std::string> out;
    for (const auto& n : model.nodes) {
        if (n.op != "embedding") continue;
        const nn::TensorDef* t = model.tensor(n.inputs.at(n.data_inputs));
        if (t == nullptr || t->size < min_floats || !SparseTable::refusal(model, n, seed).empty()) continue;
        out.push_back(n.name);
    }
    return out;
}

std::vector<std::string> SparseTables::raw_inputs(const nn::ModelDescription& model,
                                                  const std::vector<std::string>& names) {
    std::vector<std::string> out;
    for (const auto& name : names) {
        const nn::Node* node = find_embedding(model, name);
        if (node == nullptr) unknown_embedding("--raw-ids", name, model);
        out.push_back(node->inputs.front());
    }
    return out;
}

SparseTables::SparseTables(const nn::ModelDescription& model, const std::vector<std::string>& names, std::uint64_t seed,
                           const RawIdTables& raw)
    : model_(&model), dense_(model_tensors(model)) {
    auto usage = [](const std::string& name, const std::string& why) {
        throw UsageError(fmt::format("--sparse-embedding {}: {}", name, why));
    };
    std::vector<std::string> given;  // parallel to tables_ until sorted
    for (const auto& name : names) {
        const nn::Node* node = find_embedding(model, name);
        if (node == nullptr) {
            const std::string known = embedding_list(model);
            usage(name, "no embedding of model " + model.name + " has that name or table" +
                            (known.empty() ? std::string(" (it has no embedding)") : "; its embeddings: " + known));
        }
        for (std::size_t k = 0; k < tables_.size(); ++k)
            if (tables_[k].node() == node->name)
                usage(name, "names embedding " + node->name + "'s table again (already --sparse-embedding " + given[k] +
                                "): give each table once");
        if (const std::string why = SparseTable::refusal(model, *node, seed); !why.empty()) usage(name, why);
        tables_.emplace_back(model, *node, seed);
        given.push_back(name);
    }
    for (const auto& name : raw.names) {  // --raw-ids: sparse (named or not) and keyed
        const nn::Node* node = find_embedding(model, name);
        if (node == nullptr) unknown_embedding("--raw-ids", name, model);
        auto it =
            std::find_if(tables_.begin(), tables_.end(), [&](const SparseTable& t) { return t.node() == node->name; });
        if (it == tables_.end()) {
            if (const std::string why = SparseTable::refusal(model, *node, seed); !why.empty())
                throw UsageError(fmt::format("--raw-ids {}: {}", name, why));
            tables_.emplace_back(model, *node, seed);
            it = tables_.end() - 1;
        } else if (it->keyed()) {
            throw UsageError(
                fmt::format("--raw-ids {}: names embedding {} again: give each table once", name, node->name));
        }
        it->make_keyed(raw.policy);
    }
    std::sort(tables_.begin(), tables_.end(),
              [](const SparseTable& a, const SparseTable& b) { return a.tensor() < b.tensor(); });
    // The dense layout: the tables left out, the others compacted in order.
    std::erase_if(dense_, [this](const TensorInfo& t) {
        return std::any_of(tables_.begin(), tables_.end(), [&](const SparseTable& s) { return s.name() == t.name; });
    });
    std::size_t offset = 0;
    for (auto& d : dense_) {
        d.offset = offset;
        offset += d.size;
    }
    raw_.resize(tables_.size());
    requests_.resize(tables_.size());
    grads_.resize(tables_.size());
    offsets_.assign(tables_.size(), 0);
}

std::span<std::uint64_t> SparseTables::raw_ids(std::size_t input, std::int64_t batch) {
    for (std::size_t k = 0; k < tables_.size(); ++k) {
        if (!tables_[k].keyed() || tables_[k].input() != input) continue;
        const auto n = static_cast<std::size_t>(tables_[k].lookups(batch));
        if (raw_[k].size() < n) raw_[k].resize(n);
        return std::span<std::uint64_t>(raw_[k]).first(n);
    }
    return {};
}

void SparseTables::keep_raw(int k, int count, std::int64_t batch) {
    step_raw_.resize(tables_.size());
    for (std::size_t t = 0; t < tables_.size(); ++t) {
        if (!tables_[t].keyed()) continue;
        const auto n = static_cast<std::size_t>(tables_[t].lookups(batch));
        auto& step = step_raw_[t];
        step.resize(n * static_cast<std::size_t>(count));
        std::copy_n(raw_[t].begin(), n, step.begin() + static_cast<std::ptrdiff_t>(n * static_cast<std::size_t>(k)));
        if (k == count - 1) raw_[t].assign(step.begin(), step.end());
    }
}

bool SparseTables::keyed() const {
    return std::any_of(tables_.begin(), tables_.end(), [](const SparseTable& t) { return t.keyed(); });
}

bool SparseTables::is_sparse(std::size_t tensor) const {
    return std::any_of(tables_.begin(), tables_.end(), [&](const SparseTable& t) { return t.tensor() == tensor; });
}

std::string SparseTables::names() const {
    std::string out;
    for (const auto& t : tables_) out += (out.empty() ? "" : ", ") + t.name();
    return out;
}

std::vector<TensorSpec> SparseTables::wire_tensors() const {
    std::vector<TensorSpec> out = worker::wire_tensors(model_tensors(*model_));
    for (const auto& t : tables_) {
        out[t.tensor()].kind = t.keyed() ? TensorKind::kKeyedRows : TensorKind::kRows;
        out[t.tensor()].row_init = t.row_init();
        if (t.keyed()) out[t.tensor()].row_policy = t.policy();
    }
    return out;
}

std::vector<std::size_t> SparseTables::block_offsets(std::int64_t batch) const {
    std::vector<std::size_t> out;
    std::size_t offset = 0;
    for (const auto& t : tables_) {
        out.push_back(offset);
        offset += static_cast<std::size_t>(t.capacity(batch) * t.width());
    }
    return out;
}

std::size_t SparseTables::tail_floats(std::int64_t batch) const {
    std::size_t n = 0;
    for (const auto& t : tables_) n += static_cast<std::size_t>(t.capacity(batch) * t.width());
    return n;
}

nn::ModelDescription SparseTables::local_model(std::int64_t batch) const {
    nn::ModelDescription local = *model_;
    if (tables_.empty()) return local;
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < local.tensors.size(); ++i)
        if (!is_sparse(i)) {
            local.tensors[i].offset = offset;
            offset += local.tensors[i].size;
        }
    for (const auto& s : tables_) {  // the blocks, in tensor order (block_offsets())
        const std::int64_t rows = s.capacity(batch);
        auto& t = local.tensors[s.tensor()];
        t.shape = {rows, s.width()};
        t.size = rows * s.width();
        t.offset = offset;
        offset += t.size;
        local.values.at(t.name).dims = {nn::Dim::of(rows), nn::Dim::of(s.width())};
        for (auto& n : local.nodes)
            if (n.name == s.node()) n.attrs["vocabulary"] = rows;
    }
    local.parameter_count = offset;
    return local;
}

void SparseTables::map_batch(const std::function<std::span<std::int32_t>(std::size_t input)>& ids_of,
                             std::int64_t examples, std::int64_t batch) {
    offsets_ = block_offsets(batch);
    for (std::size_t k = 0; k < tables_.size(); ++k) {
        const auto local = ids_of(tables_[k].input());
        if (tables_[k].keyed()) {
            if (raw_[k].size() < local.size())
                throw std::logic_error("SparseTables::map_batch: no raw ids for table " + tables_[k].name());
            tables_[k].map_raw(std::span<const std::uint64_t>(raw_[k]).first(local.size()), local, examples);
        } else {
            tables_[k].map_batch(local, examples);
        }
        requests_[k] = tables_[k].request();
    }
}

void SparseTables::install(const PulledRows& rows, std::span<float> tail) const {
    if (rows.size() != tables_.size())
        throw std::logic_error("SparseTables::install: one pulled set per table expected");
    for (std::size_t k = 0; k < tables_.size(); ++k) tables_[k].install(rows.rows(k), tail.subspan(offsets_[k]));
}

std::span<const RowGrads> SparseTables::row_grads(std::span<const float> grad_tail) {
    for (std::size_t k = 0; k < tables_.size(); ++k) grads_[k] = tables_[k].row_grads(grad_tail.subspan(offsets_[k]));
    return grads_;
}

std::vector<std::span<float>> SparseTables::grad_rows(std::span<float> grad_tail) const {
    std::vector<std::span<float>> out;
    for (std::size_t k = 0; k < tables_.size(); ++k)
        out.push_back(
            grad_tail.subspan(offsets_[k], tables_[k].distinct() * static_cast<std::size_t>(tables_[k].width())));
    return out;
}

std::size_t SparseTables::distinct() const {
    std::size_t n = 0;
    for (const auto& t : tables_) n += t.distinct();
    return n;
}

}  // namespace psrun::worker
