#include "workerd/sparse_table.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "workerd/nn/parameter_init.h"

namespace psrun::worker {

namespace {

std::int64_t sparse_input_elements(const nn::Dims& dims) {
    std::int64_t n = 1;
    for (const auto& d : dims) n *= d.value;  // the batch axis counts once
    return n;
}

std::size_t sparse_tensor_index(const nn::ModelDescription& model, const std::string& name) {
    for (std::size_t i = 0; i < model.tensors.size(); ++i)
        if (model.tensors[i].name == name) return i;
    throw std::logic_error("SparseTable: no tensor " + name);
}

}  // namespace

std::string SparseTable::refusal(const nn::ModelDescription& model, const nn::Node& node, std::uint64_t seed) {
    const std::string& ids = node.inputs.front();
    const std::string& table = node.inputs.at(node.data_inputs);
    const int input = model.input_index(ids);
    if (input < 0)
        return "embedding " + node.name + " reads " + ids + ", which is not a model input: a sparse table's ids must " +
               "be one of the model's inputs (" + model.input_name() + (model.multi_input() ? ", ..." : "") + ")";
    if (model.fed_by_labels(static_cast<std::size_t>(input)))
        return "embedding " + node.name + " reads " + ids + ", which the labels feed";
    if (node.attrs.contains("padding_index"))
        return "embedding " + node.name + " has padding_index " + node.attrs.at("padding_index").dump() +
               " (nn.Embedding(padding_idx=...)), which a table on the parameter servers does not keep yet: train it "
               "dense (leave it out of --sparse-embedding)";
    for (const auto& n : model.nodes) {
        if (&n == &node) continue;
        for (const auto& in : n.inputs) {
            if (in == ids)
                return "node " + n.name + " also reads the model input " + ids +
                       ": a sparse table's embedding must be its only reader";
            if (in == table) return "node " + n.name + " also reads the table " + table + " (tied weights stay dense)";
        }
    }
    if (model.initial_parameters)
        return "the model brings initial values (an ONNX file); a sparse table starts from its initializer on psd: "
               "add --init description";
    const std::size_t i = sparse_tensor_index(model, table);
    const auto& t = model.tensors[i];
    if (t.shape.at(0) > (std::int64_t{1} << 32))
        return fmt::format("{} rows: only 2^32 row ids are addressable", t.shape.at(0));
    if (t.shape.at(1) > 65536) return fmt::format("rows of {} floats: at most 65536", t.shape.at(1));
    if (!nn::table_row_init(model, i, seed))
        return "its initializer cannot be drawn row by row on psd (a non-zero constant)";
    return {};
}

SparseTable::SparseTable(const nn::ModelDescription& model, const nn::Node& node, std::uint64_t seed)
    : tensor_(sparse_tensor_index(model, node.inputs.at(node.data_inputs))),
      input_(static_cast<std::size_t>(model.input_index(node.inputs.front()))),
      tensor_wire_(static_cast<std::uint32_t>(tensor_)),
      name_(node.inputs.at(node.data_inputs)),
      node_(node.name) {
    const auto& t = model.tensors[tensor_];
    rows_ = t.shape.at(0);
    width_ = t.shape.at(1);
    init_ = *nn::table_row_init(model, tensor_, seed);  // refusal() checked that it has one
    per_example_ = sparse_input_elements(model.inputs.at(input_).info.dims);
}

std::int64_t SparseTable::capacity(std::int64_t batch) const {
    // A keyed table's batch may hold more distinct raw ids than the table keeps rows.
    if (keyed_) return std::max<std::int64_t>(1, batch * per_example_);
    return std::min(rows_, std::max<std::int64_t>(1, batch * per_example_));
}

void SparseTable::map_batch(std::span<std::int32_t> ids, std::int64_t examples) {
    order_.clear();
    const auto count = std::min<std::size_t>(ids.size(), static_cast<std::size_t>(examples * per_example_));
    for (std::size_t p = 0; p < count; ++p) {
        const std::int32_t id = ids[p];
        if (id < 0 || id >= rows_)
            throw std::out_of_range(
                fmt::format("id {} at position {} of example {} is outside the {} rows of sparse "
                            "table {}",
                            id, p % static_cast<std::size_t>(per_example_), p / static_cast<std::size_t>(per_example_),
                            rows_, name_));
        order_.emplace_back(static_cast<std::uint32_t>(id), static_cast<std::uint32_t>(p));
    }
    std::sort(order_.begin(), order_.end());
    ids_.clear();
    for (const auto& [id, p] : order_) {
        if (ids_.empty() || ids_.back() != id) ids_.push_back(id);
        ids[p] = static_cast<std::int32_t>(ids_.size() - 1);
    }
    for (std::size_t p = count; p < ids.size(); ++p) ids[p] = 0;  // a short last batch: padding reads row 0
}

void SparseTable::map_raw(std::span<const std::uint64_t> raw, std::span<std::int32_t> local, std::int64_t examples) {
    if (local.size() != raw.size()) throw std::logic_error("SparseTable::map_raw: raw and local ids differ in size");
    raw_order_.clear();
    const auto count = std::min<std::size_t>(raw.size(), static_cast<std::size_t>(examples * per_example_));
    for (std::size_t p = 0; p < count; ++p) raw_order_.emplace_back(raw[p], static_cast<std::uint32_t>(p));
    std::sort(raw_order_.begin(), raw_order_.end());
    keys_.clear();
    for (const auto& [key, p] : raw_order_) {
        if (keys_.empty() || keys_.back() != key) keys_.push_back(key);
        local[p] = static_cast<std::int32_t>(keys_.size() - 1);
    }
    for (std::size_t p = count; p < local.size(); ++p) local[p] = 0;  // a short last batch: padding reads row 0
}

void SparseTable::install(std::span<const float> pulled, std::span<float> block) const {
    if (pulled.size() != distinct() * static_cast<std::size_t>(width_) || pulled.size() > block.size())
        throw std::logic_error("SparseTable::install: pulled rows of " + name_ + " do not match the batch's ids");
    std::memcpy(block.data(), pulled.data(), pulled.size() * sizeof(float));
}

RowGrads SparseTable::row_grads(std::span<const float> grad_block) const {
    const auto values = grad_block.first(distinct() * static_cast<std::size_t>(width_));
    if (keyed_) return RowGrads{.tensor = tensor_wire_, .values = values, .keys = keys_};
    return RowGrads{.tensor = tensor_wire_, .ids = ids_, .values = values};
}

}  // namespace psrun::worker
