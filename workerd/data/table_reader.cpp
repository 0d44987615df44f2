#include "workerd/data/table_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

#include "workerd/data/csv_reader.h"
#include "workerd/data/npy_reader.h"
#include "workerd/data/npy_values.h"
#include "workerd/data/npz_reader.h"
#include "workerd/data/reader_common.h"
#include "workerd/data/table_cells.h"
#include "workerd/data/table_targets.h"

namespace psrun::worker {
namespace {

// Sets `data`'s input layout for `model` with `count` examples of `values` values each.
void shape_input(LabeledImages& data, const ModelInput& model, std::size_t values) {
    data.input = model.input == InputKind::kTokens ? InputKind::kTokens : InputKind::kFeatures;
    if (data.input == InputKind::kTokens) {
        data.token_length = values;
        return;
    }
    data.images.channels = 1;
    data.images.height = 1;
    data.images.width = static_cast<int>(values);
    data.images.type = PixelType::kFloat32;
}

// Pixels of an image model that are all integers 0-255 become uint8 (scaled by 1/255 like IDX).
void maybe_to_u8(LabeledImages& data, const ModelInput& model) {
    if (model.input != InputKind::kImage || data.input == InputKind::kTokens) return;
    auto& f = data.images.f32;
    if (!std::all_of(f.begin(), f.end(), [](float v) { return v >= 0 && v <= 255 && v == std::floor(v); })) return;
    data.images.u8.assign(f.begin(), f.end());
    f.clear();
    f.shrink_to_fit();
    data.images.type = PixelType::kUint8;
}

Result<Table> load_csv(const std::vector<std::uint8_t>& bytes, const std::string& path, const TableColumns& columns,
                       const ModelInput& model) {
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const char delimiter = path.size() > 4 && (path.ends_with(".tsv") || path.ends_with(".tsv.gz")) ? '\t' : ',';
    std::vector<std::size_t> in_cols;
    std::vector<std::string> header;
    std::optional<TableTargets> targets;
    Table t;
    LabeledImages& d = t.data;
    std::size_t rows = 0;
    auto ok =
        parse_csv(text, delimiter, path, [&](const std::vector<std::string>& f, std::size_t line) -> Result<void> {
            if (header.empty()) {
                header = f;
                PSRUN_TRY_ASSIGN(auto found, TableTargets::find(header, columns.targets, path, model));
                targets = std::move(found);
                const auto& tg_cols = targets->columns();
                if (columns.inputs.empty()) {
                    for (std::size_t c = 0; c < header.size(); ++c)
                        if (std::find(tg_cols.begin(), tg_cols.end(), c) == tg_cols.end()) in_cols.push_back(c);
                } else {
                    for (const auto& name : columns.inputs) {
                        PSRUN_TRY_ASSIGN(auto c, find_column(header, name, path));
                        in_cols.push_back(c);
                    }
                }
                if (in_cols.empty()) return invalid_argument(path + ": no input columns left besides the targets");
                shape_input(d, model, in_cols.size());
                return {};
            }
            const auto cell_error = [&](std::size_t c, const std::string& what) {
                return invalid_argument(path + ": line " + std::to_string(line) + ", column '" + header[c] + "': '" +
                                        f[c] + "' " + what);
            };
            for (std::size_t c : in_cols) {
                if (d.input == InputKind::kTokens) {
                    std::int64_t v = 0;
                    if (!parse_int_cell(f[c], v)) return cell_error(c, "is not an integer token id");
                    if (v < 0 || v >= model.vocabulary)
                        return cell_error(c, "is out of the vocabulary 0-" + std::to_string(model.vocabulary - 1) +
                                                 " of the model " + model.name);
                    d.tokens.push_back(static_cast<std::int32_t>(v));
                } else {
                    float v = 0;
                    if (!parse_float_cell(f[c], v)) return cell_error(c, "is not a number");
                    d.images.f32.push_back(v);
                }
            }
            if (auto added = targets->add(f, line); !added) return added;
            ++rows;
            return {};
        });
    if (!ok) return tl::unexpected(ok.error());
    if (rows == 0) return invalid_argument(path + ": a header but no rows");
    d.images.count = d.input == InputKind::kTokens ? 0 : rows;
    PSRUN_TRY(targets->finish(d));
    maybe_to_u8(d, model);
    conform_to_model(d, model);
    t.description = "CSV table " + path + ": " + std::to_string(rows) + " rows, " + std::to_string(in_cols.size()) +
                    " input columns, target " + quoted_list(targets->names()) +
                    (d.class_names.empty() ? "" : " (" + std::to_string(d.class_names.size()) + " class names)");
    return t;
}

Result<Table> load_npz(const std::vector<std::uint8_t>& zip, const std::string& path, const TableColumns& columns,
                       const ModelInput& model) {
    const std::vector<std::uint8_t>* bytes = &zip;
    PSRUN_TRY_ASSIGN(auto members, list_npz(*bytes, path));
    if (columns.inputs.size() > 1 || columns.targets.size() > 1)
        return invalid_argument(path + ": --inputs and --targets name one array each in an .npz archive");
    const std::string in_name = columns.inputs.empty() ? "x" : columns.inputs[0];
    const std::string tg_name = columns.targets.empty() ? "y" : columns.targets[0];
    PSRUN_TRY_ASSIGN(auto in_bytes, read_npz_member(*bytes, members, in_name, path));
    PSRUN_TRY_ASSIGN(auto tg_bytes, read_npz_member(*bytes, members, tg_name, path));
    const std::string in_path = path + " array '" + in_name + "'", tg_path = path + " array '" + tg_name + "'";
    PSRUN_TRY_ASSIGN(auto in_h, parse_npy_header(in_bytes, in_path));
    Table t;
    LabeledImages& d = t.data;
    const bool image_array = model.input == InputKind::kImage && in_h.shape.size() >= 3 &&
                             ((in_h.kind == 'u' && in_h.item_bytes == 1) || (in_h.kind == 'f' && in_h.item_bytes == 4));
    if (image_array) {
        PSRUN_TRY_ASSIGN(auto images, parse_npy_images(in_bytes, in_path, ImageLayout::kAuto));
        d.images = std::move(images);
    } else {
        PSRUN_TRY_ASSIGN(auto rows, npy_rows(in_bytes, in_h, in_path));
        shape_input(d, model, rows.cols);
        if (d.input == InputKind::kTokens) {
            PSRUN_TRY_ASSIGN(auto ids, npy_as_int32(in_bytes, in_h, in_path));
            d.tokens = std::move(ids);
        } else {
            PSRUN_TRY_ASSIGN(auto values, npy_as_floats(in_bytes, in_h, in_path));
            d.images.f32 = std::move(values);
            d.images.count = rows.rows;
            if (rows.integral) maybe_to_u8(d, model);
        }
    }
    PSRUN_TRY_ASSIGN(auto tg_h, parse_npy_header(tg_bytes, tg_path));
    d.target = model.target;
    if (model.target == TargetKind::kClass) {
        PSRUN_TRY_ASSIGN(auto labels, parse_npy_labels(tg_bytes, tg_path));
        d.labels = std::move(labels);
    } else {
        PSRUN_TRY_ASSIGN(auto rows, npy_rows(tg_bytes, tg_h, tg_path));
        PSRUN_TRY_ASSIGN(auto values, npy_as_floats(tg_bytes, tg_h, tg_path));
        d.target_length = rows.cols;
        d.targets = std::move(values);
    }
    conform_to_model(d, model);
    t.description = ".npz archive " + path + ": " + std::to_string(d.size()) + " examples (arrays '" + in_name +
                    "' and '" + tg_name + "')";
    return t;
}

}  // namespace

Result<Table> parse_table(const std::vector<std::uint8_t>& bytes, const std::string& path, TableFormat format,
                          const TableColumns& columns, const ModelInput& model) {
    return format == TableFormat::kCsv ? load_csv(bytes, path, columns, model) : load_npz(bytes, path, columns, model);
}

Result<Table> load_table(const std::string& path, TableFormat format, const TableColumns& columns,
                         const ModelInput& model) {
    auto bytes = read_maybe_gzip(path);
    if (!bytes) return make_error(ErrorCode::kInvalidArgument, bytes.error().message);
    return parse_table(*bytes, path, format, columns, model);
}

}  // namespace psrun::worker
