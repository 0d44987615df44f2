#include "workerd/input_columns.h"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "workerd/data/npy_reader.h"
#include "workerd/data/npy_values.h"
#include "workerd/data/reader_common.h"
#include "workerd/nn/model_summary.h"
#include "workerd/nn/tensor_shape.h"

namespace psrun::worker {

namespace {

Error invalid(std::string what) { return Error{ErrorCode::kInvalidArgument, std::move(what)}; }

// "a [4] float, b [12] int" for messages.
std::string extra_inputs_text(const nn::ModelDescription& model) {
    std::string out;
    for (std::size_t i = 1; i < model.inputs.size(); ++i)
        if (!model.fed_by_labels(i))
            out += (out.empty() ? "" : ", ") + model.inputs[i].name + " [" + nn::shape_text(model.inputs[i].info.dims) +
                   "] " + nn::to_string(model.inputs[i].info.type);
    return out;
}

// One value of a .npy element as a double (float32/64, int8-64, uint8-64, either endianness).
double element(const std::vector<std::uint8_t>& bytes, const NpyHeader& h, std::size_t e) {
    std::uint64_t raw = 0;
    for (std::size_t k = 0; k < h.item_bytes; ++k) {
        const std::size_t at = h.data_offset + e * h.item_bytes + (h.big_endian ? h.item_bytes - 1 - k : k);
        raw |= static_cast<std::uint64_t>(bytes[at]) << (8 * k);
    }
    if (h.kind == 'f')
        return h.item_bytes == 4 ? std::bit_cast<float>(static_cast<std::uint32_t>(raw)) : std::bit_cast<double>(raw);
    if (h.kind == 'u') return static_cast<double>(raw);
    const unsigned shift = static_cast<unsigned>(64 - 8 * h.item_bytes);
    return static_cast<double>(static_cast<std::int64_t>(raw << shift) >> shift);
}

// The embedding with the fewest rows among those that read `input` directly (nullptr: none does):
// each of the input's ids must be a row of every such table, dense or sparse.
const nn::Node* smallest_table_reader(const nn::ModelDescription& model, const std::string& input, std::int64_t& rows) {
    const nn::Node* out = nullptr;
    for (const auto& node : model.nodes) {
        if (node.op != "embedding" || node.inputs.empty() || node.inputs[0] != input) continue;
        const auto v = node.attrs.value("vocabulary", std::int64_t{0});
        if (v > 0 && (out == nullptr || v < rows)) {
            out = &node;
            rows = v;
        }
    }
    return out;
}

Result<InputColumn> load_column(const nn::ModelDescription& model, const nn::InputDef& input, const std::string& file,
                                std::string_view option, std::size_t rows, const std::string& rows_from, bool raw) {
    const std::string where = std::string(option) + " " + input.name + "=" + file;
    auto bytes = read_maybe_gzip(file);
    if (!bytes) return tl::unexpected(invalid(where + ": " + bytes.error().message));
    auto header = parse_npy_header(*bytes, file);
    if (!header) return tl::unexpected(invalid(where + ": " + header.error().message));
    const NpyHeader& h = *header;
    const bool ints = input.info.type == nn::ElementType::kInt;
    const bool float_dtype = h.kind == 'f' && (h.item_bytes == 4 || h.item_bytes == 8);
    const bool int_dtype = (h.kind == 'i' || h.kind == 'u') && h.item_bytes >= 1 && h.item_bytes <= 8;
    if (!(int_dtype || (float_dtype && !ints)))
        return tl::unexpected(invalid(where + ": dtype " + h.descr + " for the " + nn::to_string(input.info.type) +
                                      " input " + input.name + " (give " +
                                      (ints ? "an integer array of ids" : "float32, float64 or integers") + ")"));
    const auto per_example = static_cast<std::size_t>(nn::elements_per_example(input.info.dims).value_or(0));
    std::uint64_t count = 1;
    for (const auto d : h.shape) count *= d;
    if (h.shape.empty() || per_example == 0 || h.shape[0] * per_example != count)
        return tl::unexpected(invalid(where + ": its rows are not examples of the input " + input.name + " (" +
                                      nn::shape_text(input.info.dims) + " = " + std::to_string(per_example) +
                                      " values each)"));
    if (h.shape[0] != rows)
        return tl::unexpected(invalid(where + ": " + file + " has " + std::to_string(h.shape[0]) + " rows and " +
                                      rows_from + " has " + std::to_string(rows) +
                                      " examples: give one row per example, in the same order"));
    if ((bytes->size() - h.data_offset) / h.item_bytes < count)
        return tl::unexpected(invalid(where + ": the file is shorter than its shape says"));
    InputColumn c;
    c.name = input.name;
    c.file = file;
    c.per_example = per_example;
    if (raw) {  // raw ids: any 64-bit value, exactly, no vocabulary
        if (!int_dtype)
            return tl::unexpected(invalid(where + ": dtype " + h.descr + " for raw ids (--raw-ids): give integers"));
        auto ids = npy_as_raw_ids(*bytes, h, file);
        if (!ids) return tl::unexpected(invalid(where + ": " + ids.error().message));
        c.u64 = std::move(*ids);
        return c;
    }
    if (ints) c.i32.resize(count);
    else c.f32.resize(count);
    std::int64_t vocabulary = 0;
    const nn::Node* table = ints ? smallest_table_reader(model, input.name, vocabulary) : nullptr;
    for (std::size_t e = 0; e < count; ++e) {
        const double v = element(*bytes, h, e);
        if (ints) {
            if (v < 0 || v > 2147483647.0)
                return tl::unexpected(invalid(where + ": id " + std::to_string(static_cast<long long>(v)) + " at row " +
                                              std::to_string(e / per_example) + " is not in [0, 2^31)"));
            if (table != nullptr && v >= static_cast<double>(vocabulary))  // as the primary input's check words it
                return tl::unexpected(invalid(where + ": id " + std::to_string(static_cast<long long>(v)) +
                                              " at example " + std::to_string(e / per_example) + " position " +
                                              std::to_string(e % per_example) + " is out of range 0-" +
                                              std::to_string(vocabulary - 1) + " (embedding " + table->name +
                                              " of model " + model.name + " reads " + input.name +
                                              " and has a vocabulary of " + std::to_string(vocabulary) + ")"));
            c.i32[e] = static_cast<std::int32_t>(v);
        } else {
            c.f32[e] = static_cast<float>(v);
        }
    }
    return c;
}

}  // namespace

Result<std::vector<InputColumn>> load_input_columns(const nn::ModelDescription& model,
                                                    const std::vector<std::string>& args, std::string_view option,
                                                    std::size_t rows, const std::string& rows_from,
                                                    const std::vector<std::string>& raw_inputs,
                                                    const std::vector<std::string>& zeros_when_absent) {
    const std::string opt(option);
    if (!model.column_inputs()) {
        if (args.empty()) return std::vector<InputColumn>{};
        return tl::unexpected(invalid(opt + " " + args.front() + ": model " + model.name + " has one input (" +
                                      model.input_name() + "), given by the images or data options: drop " + opt));
    }
    std::vector<std::string> files(model.inputs.size());
    for (const auto& arg : args) {
        const auto eq = arg.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
            return tl::unexpected(invalid(opt + " " + arg + ": expected NAME=FILE.npy (the model's extra inputs: " +
                                          extra_inputs_text(model) + ")"));
        const std::string name = arg.substr(0, eq);
        const int index = model.input_index(name);
        if (index == 0)
            return tl::unexpected(invalid(opt + " " + arg + ": " + name +
                                          " is the model's primary input, read from the images or data options "
                                          "(--train-images/--test-images, --data-dir, --train-data): give " +
                                          opt + " for " + extra_inputs_text(model)));
        if (index > 0 && model.fed_by_labels(static_cast<std::size_t>(index)))
            return tl::unexpected(invalid(opt + " " + arg + ": " + name +
                                          " is the model's label input, fed from the data's labels: give " + opt +
                                          " for " + extra_inputs_text(model)));
        if (index < 0)
            return tl::unexpected(invalid(opt + " " + arg + ": model " + model.name + " has no input '" + name +
                                          "' (its extra inputs: " + extra_inputs_text(model) + ")"));
        if (!files[static_cast<std::size_t>(index)].empty())
            return tl::unexpected(invalid(opt + " " + arg + ": the input " + name + " is already given (" +
                                          files[static_cast<std::size_t>(index)] + ")"));
        files[static_cast<std::size_t>(index)] = arg.substr(eq + 1);
    }
    std::vector<InputColumn> columns;
    for (std::size_t i = 1; i < model.inputs.size(); ++i) {
        const nn::InputDef& input = model.inputs[i];
        if (model.fed_by_labels(i)) continue;  // the data's labels
        if (files[i].empty() &&
            std::find(zeros_when_absent.begin(), zeros_when_absent.end(), input.name) != zeros_when_absent.end()) {
            InputColumn zeros;
            zeros.name = input.name;
            zeros.file = "(zeros: not given)";
            zeros.per_example = static_cast<std::size_t>(nn::elements_per_example(input.info.dims).value_or(0));
            if (input.info.type == nn::ElementType::kInt) zeros.i32.resize(rows * zeros.per_example);
            else zeros.f32.resize(rows * zeros.per_example);
            columns.push_back(std::move(zeros));
            continue;
        }
        if (files[i].empty())
            return tl::unexpected(invalid("model " + model.name + " takes the input " + input.name + " [" +
                                          nn::shape_text(input.info.dims) + "] " + nn::to_string(input.info.type) +
                                          ": give " + opt + " " + input.name + "=FILE.npy (one row per example)"));
        const bool raw = std::find(raw_inputs.begin(), raw_inputs.end(), input.name) != raw_inputs.end();
        PSRUN_TRY_ASSIGN(auto column, load_column(model, input, files[i], option, rows, rows_from, raw));
        columns.push_back(std::move(column));
    }
    return columns;
}

}  // namespace psrun::worker
