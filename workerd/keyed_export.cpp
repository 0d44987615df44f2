#include "workerd/keyed_export.h"

#include <algorithm>
#include <bit>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "common/file_names.h"

namespace psrun::worker {
namespace {

const KeyedRows* keyed_table_named(std::span<const KeyedRows> tables, const std::string& name) {
    for (const auto& t : tables)
        if (t.table() == name) return &t;
    return nullptr;
}

// The embedding node reading table `name`, or nullptr.
const nn::Node* keyed_export_reader(const nn::ModelDescription& model, const std::string& name) {
    for (const auto& n : model.nodes)
        if (n.op == "embedding" && n.inputs.size() > n.data_inputs && n.inputs[n.data_inputs] == name) return &n;
    return nullptr;
}

}  // namespace

KeyedExport keyed_export_model(const nn::ModelDescription& model, std::span<const float> dense,
                               std::span<const KeyedRows> tables) {
    KeyedExport out{model, {}};
    std::int64_t offset = 0;
    std::size_t from = 0;  // next float of `dense`
    for (auto& t : out.model.tensors) {
        const KeyedRows* rows = keyed_table_named(tables, t.name);
        t.offset = offset;
        if (rows == nullptr) {
            if (from + static_cast<std::size_t>(t.size) > dense.size())
                throw std::invalid_argument("keyed_export_model: the dense values end before tensor " + t.name);
            out.params.insert(out.params.end(), dense.begin() + static_cast<std::ptrdiff_t>(from),
                              dense.begin() + static_cast<std::ptrdiff_t>(from + static_cast<std::size_t>(t.size)));
            from += static_cast<std::size_t>(t.size);
            offset += t.size;
            continue;
        }
        const nn::Node* node = keyed_export_reader(model, t.name);
        if (node == nullptr || t.shape.size() != 2 || t.shape[1] != static_cast<std::int64_t>(rows->width()))
            throw std::invalid_argument("keyed_export_model: " + t.name + " is not a [V, " +
                                        std::to_string(rows->width()) + "] embedding table of model " + model.name);
        const auto r = static_cast<std::int64_t>(rows->rows()) + 1;  // the rows, then the row of unknown ids
        t.shape = {r, t.shape[1]};
        t.size = r * t.shape[1];
        offset += t.size;
        out.params.insert(out.params.end(), rows->values().begin(), rows->values().end());
        out.params.resize(out.params.size() + rows->width(), 0.0f);
        out.model.values.at(t.name).dims = {nn::Dim::of(r), nn::Dim::of(t.shape[1])};
        for (auto& n : out.model.nodes)
            if (n.name == node->name) n.attrs["vocabulary"] = r;
    }
    if (from != dense.size())
        throw std::invalid_argument("keyed_export_model: " + std::to_string(dense.size() - from) +
                                    " dense values left over for model " + model.name);
    out.model.parameter_count = offset;
    return out;
}

std::string npy_u64_bytes(std::span<const std::uint64_t> values) {
    std::string dict = fmt::format("{{'descr': '<u8', 'fortran_order': False, 'shape': ({},), }}", values.size());
    dict.append(63 - (10 + dict.size()) % 64, ' ');  // header padded to a multiple of 64 bytes, '\n' last
    dict += '\n';
    std::string out = "\x93NUMPY";
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(dict.size() & 0xff);
    out += static_cast<char>(dict.size() >> 8);
    out += dict;
    static_assert(std::endian::native == std::endian::little, "the .npy writer assumes a little-endian host");
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(std::uint64_t));
    return out;
}

std::string keyed_ids_path(const std::string& onnx_path, const std::string& node) {
    return sibling_file(onnx_path, node, ".ids.npy");
}

nlohmann::json keyed_export_metadata(const nn::ModelDescription& model, std::span<const KeyedRows> tables,
                                     const std::vector<std::string>& ids_files) {
    static constexpr const char* kInitNames[] = {"zeros", "uniform", "normal", "truncated_normal"};
    nlohmann::json out = nlohmann::json::array();
    for (std::size_t i = 0; i < tables.size(); ++i) {
        const KeyedRows& t = tables[i];
        const nn::Node* node = keyed_export_reader(model, t.table());
        out.push_back(
            {{"table", t.table()},
             {"embedding", node ? node->name : std::string()},
             {"input", node ? node->inputs.front() : std::string()},
             {"rows", t.rows()},
             {"default_row", t.rows()},
             {"ids_file", i < ids_files.size() ? std::filesystem::path(ids_files[i]).filename().string() : ""},
             {"row_init",
              {{"kind", kInitNames[static_cast<int>(t.init().kind) & 3]},
               {"scale", t.init().scale},
               {"seed", t.init().seed}}}});
    }
    return out;
}

}  // namespace psrun::worker
