#include "workerd/sparse_tables.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "common/result.h"
#include "workerd/nn/parameter_init.h"

namespace psrun::worker {

namespace {

std::int64_t elements(const nn::Dims& dims) {
    std::int64_t n = 1;
    for (const auto& d : dims) n *= d.value;  // the batch axis counts once
    return n;
}

}  // namespace

std::string SparseTables::refusal(const nn::ModelDescription& model, const nn::Node& node, std::uint64_t seed) {
    const std::string table = node.inputs.at(node.data_inputs);
    if (node.inputs.front() != model.input_name())
        return "embedding " + node.name + " reads " + node.inputs.front() + ", not the model's input " + model.input_name() +
               ": a sparse table's ids must be the model input";
    for (const auto& n : model.nodes) {
        if (&n == &node) continue;
        for (const auto& in : n.inputs) {
            if (in == model.input_name())
                return "node " + n.name + " also reads the model input " + model.input_name() +
                       ": a sparse table's embedding must be its only reader";
            if (in == table) return "node " + n.name + " also reads the table " + table + " (tied weights stay dense)";
        }
    }
    if (model.initial_parameters)
        return "the model brings initial values (an ONNX file); a sparse table starts from its initializer on psd: "
               "add --init description";
    for (std::size_t i = 0; i < model.tensors.size(); ++i) {
        const auto& t = model.tensors[i];
        if (t.name != table) continue;
        if (t.shape.at(0) > (std::int64_t{1} << 32))
            return fmt::format("{} rows: only 2^32 row ids are addressable", t.shape.at(0));
        if (t.shape.at(1) > 65536) return fmt::format("rows of {} floats: at most 65536", t.shape.at(1));
        if (!nn::table_row_init(model, i, seed)) return "its initializer cannot be drawn row by row on psd (a non-zero constant)";
    }
    return {};
}

std::optional<std::string> SparseTables::automatic(const nn::ModelDescription& model, std::int64_t min_floats,
                                                   std::uint64_t seed) {
    const nn::Node* best = nullptr;
    std::int64_t best_size = 0;
    for (const auto& n : model.nodes) {
        if (n.op != "embedding") continue;
        const nn::TensorDef* t = model.tensor(n.inputs.at(n.data_inputs));
        if (t == nullptr || t->size < min_floats || t->size <= best_size || !refusal(model, n, seed).empty()) continue;
        best = &n;
        best_size = t->size;
    }
    if (best == nullptr) return std::nullopt;
    return best->name;
}

SparseTables::SparseTables(const nn::ModelDescription& model, const std::vector<std::string>& names,
                           std::uint64_t seed)
    : model_(&model), dense_(model_tensors(model)) {
    if (names.empty()) return;
    auto usage = [](const std::string& name, const std::string& why) {
        throw UsageError(fmt::format("--sparse-embedding {}: {}", name, why));
    };
    if (names.size() > 1) usage(names[1], "one sparse table per model for now (give the largest embedding)");
    const std::string& name = names.front();
    // The embedding node: by its name, or by its table's name.
    const nn::Node* node = nullptr;
    for (const auto& n : model.nodes) {
        if (n.op != "embedding") continue;
        const std::string& table = n.inputs.at(n.data_inputs);
        if (n.name == name || table == name) node = &n;
    }
    if (node == nullptr) {
        std::string known;
        for (const auto& n : model.nodes)
            if (n.op == "embedding") known += (known.empty() ? "" : ", ") + n.name + " (table " + n.inputs.at(n.data_inputs) + ")";
        usage(name, "no embedding of model " + model.name + " has that name or table" +
                        (known.empty() ? std::string(" (it has no embedding)") : "; its embeddings: " + known));
    }
    if (const std::string why = refusal(model, *node, seed); !why.empty()) usage(name, why);
    name_ = node->inputs.at(node->data_inputs);
    node_ = node->name;
    for (std::size_t i = 0; i < model.tensors.size(); ++i)
        if (model.tensors[i].name == name_) tensor_ = i;
    const auto& t = model.tensors[tensor_];
    rows_ = t.shape.at(0);
    width_ = t.shape.at(1);
    init_ = *nn::table_row_init(model, tensor_, seed);  // refusal() checked that it has one
    per_example_ = elements(model.input().dims);
    table_ = true;
    // The dense layout: the table left out, the others compacted in order.
    dense_.erase(dense_.begin() + static_cast<std::ptrdiff_t>(tensor_));
    std::size_t offset = 0;
    for (auto& d : dense_) {
        d.offset = offset;
        offset += d.size;
    }
    request_.tensor = static_cast<std::uint32_t>(tensor_);
    grads_.tensor = static_cast<std::uint32_t>(tensor_);
}

std::vector<TensorSpec> SparseTables::wire_tensors() const {
    std::vector<TensorSpec> out = worker::wire_tensors(model_tensors(*model_));
    if (table_) {
        out[tensor_].kind = TensorKind::kRows;
        out[tensor_].row_init = init_;
    }
    return out;
}

std::int64_t SparseTables::capacity(std::int64_t batch) const {
    return table_ ? std::min(rows_, std::max<std::int64_t>(1, batch * per_example_)) : 0;
}

std::size_t SparseTables::tail_floats(std::int64_t batch) const {
    return static_cast<std::size_t>(capacity(batch) * width_);
}

nn::ModelDescription SparseTables::local_model(std::int64_t batch) const {
    nn::ModelDescription local = *model_;
    if (!table_) return local;
    const std::int64_t rows = capacity(batch);
    auto& t = local.tensors[tensor_];
    t.shape = {rows, width_};
    t.size = rows * width_;
    local.values.at(t.name).dims = {nn::Dim::of(rows), nn::Dim::of(width_)};
    for (auto& n : local.nodes)
        if (n.name == node_) n.attrs["vocabulary"] = rows;
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < local.tensors.size(); ++i)
        if (i != tensor_) {
            local.tensors[i].offset = offset;
            offset += local.tensors[i].size;
        }
    t.offset = offset;
    local.parameter_count = offset + t.size;
    return local;
}

void SparseTables::map_batch(std::span<std::int32_t> ids, std::int64_t examples) {
    order_.clear();
    const auto count = std::min<std::size_t>(ids.size(), static_cast<std::size_t>(examples * per_example_));
    for (std::size_t p = 0; p < count; ++p) {
        const std::int32_t id = ids[p];
        if (id < 0 || id >= rows_)
            throw std::out_of_range(fmt::format("id {} at position {} of example {} is outside the {} rows of sparse "
                                                "table {}",
                                                id, p % static_cast<std::size_t>(per_example_),
                                                p / static_cast<std::size_t>(per_example_), rows_, name_));
        order_.emplace_back(static_cast<std::uint32_t>(id), static_cast<std::uint32_t>(p));
    }
    std::sort(order_.begin(), order_.end());
    ids_.clear();
    for (const auto& [id, p] : order_) {
        if (ids_.empty() || ids_.back() != id) ids_.push_back(id);
        ids[p] = static_cast<std::int32_t>(ids_.size() - 1);
    }
    for (std::size_t p = count; p < ids.size(); ++p) ids[p] = 0;  // a short last batch: padding reads row 0
    request_.ids = ids_;
}

void SparseTables::install(const PulledRows& rows, std::span<float> tail) const {
    const auto values = rows.rows(0);
    if (values.size() != ids_.size() * static_cast<std::size_t>(width_) || values.size() > tail.size())
        throw std::logic_error("SparseTables::install: pulled rows do not match the batch's ids");
    std::memcpy(tail.data(), values.data(), values.size() * sizeof(float));
}

std::span<const RowGrads> SparseTables::row_grads(std::span<const float> grad_tail) {
    grads_.ids = ids_;
    grads_.values = grad_tail.first(ids_.size() * static_cast<std::size_t>(width_));
    return {&grads_, 1};
}

}  // namespace psrun::worker
