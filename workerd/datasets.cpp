#include "workerd/datasets.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>

#include <spdlog/spdlog.h>

#include "workerd/data/dataset_fetch.h"
#include "workerd/data/idx_reader.h"
#include "workerd/data/memory_source.h"
#include "workerd/data/split_files.h"
#include "workerd/input_columns.h"
#include "workerd/nn/model_summary.h"
#include "workerd/sparse_tables.h"
#include "workerd/table_split.h"

namespace psrun::worker {
namespace {

// Whether `raw_inputs` (the inputs tables keyed by raw ids read) holds the model's first input.
bool primary_in(const nn::ModelDescription& model, const std::vector<std::string>& raw_inputs) {
    return std::find(raw_inputs.begin(), raw_inputs.end(), model.input_name()) != raw_inputs.end();
}

bool files_given(const TrainOptions& o) {
    return !o.train_images.empty() || !o.train_labels.empty() || !o.test_images.empty() || !o.test_labels.empty();
}

// Whether --train-images/--test-images F is memory-mapped: a raw .npy of uint8/float32 images or
// features for a class model, with --stream on or larger than --stream-memory-mb.
bool map_it(const std::string& path, const TrainOptions& o, const ModelInput& model) {
    if (model.input == InputKind::kTokens || model.target != TargetKind::kClass || o.stream == "off") return false;
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return false;
    std::ifstream in(path, std::ios::binary);
    char magic[6] = {};
    in.read(magic, 6);
    if (std::string_view(magic, 6) != "\x93NUMPY") return false;
    return o.stream == "on" || size > static_cast<std::uintmax_t>(o.stream_memory_mb) << 20;
}

// A mapped split: the images stay in the file; `out` gets the labels and the shape.
Result<std::shared_ptr<const MappedNpy>> map_split(const std::string& split, const SplitFiles& files,
                                                   ImageLayout layout, const ModelInput& model, LabeledImages& out) {
    if (files.labels.empty() && model.labels_needed)
        return make_error(ErrorCode::kInvalidArgument,
                          "--" + split + "-images " + files.images + " needs --" + split + "-labels");
    const ImageDims dims{model.channels, model.height, model.width};
    PSRUN_TRY_ASSIGN(auto mapped,
                     MappedNpy::open(files.images, layout, model.input == InputKind::kImage ? &dims : nullptr));
    auto labels = files.labels.empty() ? Result<std::vector<std::int32_t>>(std::vector<std::int32_t>(mapped->count()))
                                       : read_labels_file(files.labels);
    if (!labels) {
        Error e = labels.error();
        e.code = ErrorCode::kInvalidArgument;
        return tl::unexpected(e);
    }
    out.input = mapped->flat() ? InputKind::kFeatures : InputKind::kImage;
    out.images.count = mapped->count();
    out.images.channels = mapped->channels();
    out.images.height = mapped->height();
    out.images.width = mapped->width();
    out.images.type = mapped->rows().type;
    out.labels = std::move(*labels);
    return std::shared_ptr<const MappedNpy>(mapped);
}

Result<Datasets> load_from_files(const TrainOptions& o, ImageLayout layout, const ModelInput& model) {
    if (!o.data_dir.empty())
        throw UsageError(
            "--data-dir and --train-images/--test-images exclude each other: give one or the "
            "other");
    if (o.train_images.empty() || o.test_images.empty())
        throw UsageError(
            "give both --train-images and --test-images (with --train-labels and --test-labels, "
            "except for cifar10:/cifar100: batches)");
    Datasets d;
    d.name = "files";
    const SplitFiles train_files{o.train_images, o.train_labels}, test_files{o.test_images, o.test_labels};
    if (map_it(o.train_images, o, model)) {
        PSRUN_TRY_ASSIGN(auto mapped, map_split("train", train_files, layout, model, d.train));
        d.train_mapped = mapped;
    } else {
        PSRUN_TRY_ASSIGN(auto train, load_split_files("train", train_files, layout, &model));
        d.train = std::move(train);
    }
    if (map_it(o.test_images, o, model)) {
        PSRUN_TRY_ASSIGN(auto mapped, map_split("test", test_files, layout, model, d.test));
        d.test_mapped = mapped;
    } else {
        PSRUN_TRY_ASSIGN(auto test, load_split_files("test", test_files, layout, &model));
        d.test = std::move(test);
    }
    return d;
}

// --train-data/--test-data: image folders, TFRecord files, tables.
Result<Datasets> load_from_data(const TrainOptions& o, const ModelInput& model, const Normalization& normalization) {
    if (!o.data_dir.empty() || files_given(o))
        throw UsageError("--train-data/--test-data exclude --data-dir and --train-images/--test-images: give one kind");
    PSRUN_TRY_ASSIGN(auto loaded, load_data(data_options(o), model, normalization));
    Datasets d;
    d.name = "files";
    auto take = [&](LoadedSplit& s, LabeledImages& memory, std::shared_ptr<StreamPlan>& stream, std::size_t& examples,
                    std::string& description, const std::string& label, const std::string& spec) -> Result<void> {
        description = s.description;
        examples = s.size;
        if (s.stream) {
            stream = s.stream;
            return {};
        }
        memory = std::move(*s.memory);
        memory.normalization = normalization;
        conform_to_model(memory, model);
        return check_fits_model(memory, {label + " " + spec, label + " " + spec}, model);
    };
    PSRUN_TRY(
        take(loaded.train, d.train, d.train_stream, d.train_examples, d.train_description, "train data", o.train_data));
    PSRUN_TRY(take(loaded.test, d.test, d.test_stream, d.test_examples, d.test_description, "test data",
                   o.test_data.empty() ? o.train_data : o.test_data));
    d.class_names = loaded.train.class_names;
    return d;
}

TableColumnOptions table_column_options(const TrainOptions& o) {
    return {o.input_columns, o.value_separator, o.bag_weights, o.column_names, o.delimiter};
}

// --input-columns: CSV/TSV tables of --train-data and --test-data feed every input by column.
Result<Datasets> load_from_columns(const TrainOptions& o, const ModelInput& model, const Normalization& normalization) {
    if (!o.description)
        return make_error(ErrorCode::kInvalidArgument, "--input-columns needs the model resolved first (a bug)");
    if (!o.data_dir.empty() || files_given(o) || !o.train_inputs.empty() || !o.test_inputs.empty())
        throw UsageError(
            "--input-columns reads every input from the --train-data/--test-data tables: drop --data-dir, "
            "--train-images/--test-images and --train-input/--test-input");
    if (o.train_data.empty() || o.test_data.empty())
        throw UsageError(
            "--input-columns needs --train-data F.csv and --test-data F.csv (two tables of the same columns)");
    if (!o.inputs.empty())
        throw UsageError(
            "--inputs and --input-columns exclude each other: name each input's columns with --input-columns "
            "NAME=COL,...");
    PSRUN_TRY_ASSIGN(auto spec, parse_table_columns(table_column_options(o)));
    const auto targets = split_list(o.targets);
    Datasets d;
    d.name = "files";
    for (const bool train : {true, false}) {
        const std::string& path = train ? o.train_data : o.test_data;
        PSRUN_TRY_ASSIGN(auto table, load_table_split(path, spec, *o.description, targets,
                                                      SparseTables::raw_inputs(*o.description, o.raw_ids)));
        LabeledImages& split = train ? d.train : d.test;
        split = std::move(table.data);
        split.normalization = normalization;
        conform_to_model(split, model);
        const std::string label = (train ? "train data " : "test data ") + path;
        PSRUN_TRY(check_fits_model(split, {label, label}, model));
        (train ? d.train_description : d.test_description) = table.description;
        spdlog::info("{} data: {}", train ? "train" : "test", table.description);
    }
    if (d.train.class_names != d.test.class_names)
        return make_error(ErrorCode::kInvalidArgument,
                          "--test-data " + o.test_data + ": its class names differ from --train-data " + o.train_data +
                              "'s (give both tables every class, or integer labels)");
    d.class_names = d.train.class_names;
    return d;
}

Result<Datasets> load_from_dir(const TrainOptions& o) {
    const std::string dir = resolved_data_dir(o);
    auto train = load_split(dir, "train");
    auto test = train ? load_split(dir, "t10k") : Result<LabeledImages>();
    if (!train || !test)
        return make_error(ErrorCode::kNotFound,
                          (!train ? train.error() : test.error()).message + " (run `psrun data fetch --dataset " +
                              o.dataset + (o.data_dir.empty() ? "" : " --data-dir " + o.data_dir) + "` first)");
    Datasets d;
    d.train = std::move(*train);
    d.test = std::move(*test);
    d.name = o.dataset;
    return d;
}

// The model's inputs after the first, from --train-input/--test-input, as columns of both
// in-memory splits (one row per example, as many as the split's labels).
Result<void> attach_columns(const TrainOptions& o, Datasets& data, const SplitNames& train, const SplitNames& test) {
    const bool several = o.description && o.description->column_inputs();
    if (!several && o.train_inputs.empty() && o.test_inputs.empty()) return {};
    if (!o.description)
        return make_error(ErrorCode::kInvalidArgument,
                          "--train-input/--test-input need the model resolved first (a bug)");
    if (several && (data.train_mapped || data.test_mapped || data.train_stream || data.test_stream))
        return make_error(
            ErrorCode::kInvalidArgument,
            "model " + o.description->name +
                " has several inputs: its splits must be in memory (give --stream off, or smaller files)");
    const auto raw = SparseTables::raw_inputs(*o.description, o.raw_ids);  // --raw-ids: read as 64-bit ids
    auto train_columns =
        load_input_columns(*o.description, o.train_inputs, "--train-input", data.train.size(), train.labels, raw);
    if (!train_columns) return tl::unexpected(train_columns.error());
    PSRUN_TRY_ASSIGN(auto test_columns, load_input_columns(*o.description, o.test_inputs, "--test-input",
                                                           data.test.size(), test.labels, raw));
    data.train.columns = std::move(*train_columns);
    data.test.columns = std::move(test_columns);
    return {};
}

}  // namespace

ModelInput model_input(const nn::ModelDescription& model, const std::vector<std::string>& raw_inputs) {
    const auto& d = model.input().dims;
    const auto dim = [&](std::size_t i) { return static_cast<int>(i < d.size() ? d[i].value : 1); };
    ModelInput in{model.name, 1, 1, 1, static_cast<int>(model.classes)};
    if (model.input().type == nn::ElementType::kInt) {
        // Token ids: L per example; the vocabulary is the smallest table that reads them.
        in.input = InputKind::kTokens;
        in.length = nn::elements_per_example(d).value_or(0);
        for (const auto& node : model.nodes)
            if (node.op == "embedding" && !node.inputs.empty() && node.inputs[0] == model.input_name()) {
                const auto v = node.attrs.value("vocabulary", std::int64_t{0});
                if (v > 0 && (in.vocabulary == 0 || v < in.vocabulary)) in.vocabulary = v;
            }
    } else if (d.size() == 4) {  // [N, C, H, W]
        in = ModelInput{model.name, dim(1), dim(2), dim(3), in.classes};
    } else if (d.size() == 3) {  // [N, A, B]: 1 x A x B (an LSTM over an image's rows reads the same values)
        in = ModelInput{model.name, 1, dim(1), dim(2), in.classes};
    } else {  // [N, F]; a volume [N, C, D, H, W] has no image layout: its C*D*H*W values as features
        in.input = InputKind::kFeatures;
        in.length = nn::elements_per_example(d).value_or(0);
    }
    in.raw_ids = in.input == InputKind::kTokens && primary_in(model, raw_inputs);
    if (!model.labels_used()) {  // read if given, feed nothing: any class
        in.classes = std::numeric_limits<int>::max();
        in.labels_needed = false;
    }
    if (!model.classification()) {
        in.target = TargetKind::kVector;
        in.target_length = model.loss == nn::LossKind::kGraph
                               ? model.classes  // the label input's T
                               : nn::elements_per_example(model.value(model.output).dims).value_or(0);
    }
    return in;
}

Result<Datasets> load_datasets(const TrainOptions& o, const ModelInput& given) {
    ModelInput model = given;  // --raw-ids on the primary input: read as raw ids
    if (o.description && !o.raw_ids.empty())
        model.raw_ids = model.input == InputKind::kTokens &&
                        primary_in(*o.description, SparseTables::raw_inputs(*o.description, o.raw_ids));
    auto normalization = parse_normalization(o.normalize);
    if (!normalization) throw UsageError(normalization.error().message);
    auto layout = parse_image_layout(o.image_layout);
    if (!layout) throw UsageError(layout.error().message);
    if (table_column_options(o).any()) {
        if (o.input_columns.empty()) throw UsageError(parse_table_columns(table_column_options(o)).error().message);
        return load_from_columns(o, model, *normalization);
    }
    if (!o.train_data.empty() || !o.test_data.empty()) {
        if ((o.description && o.description->column_inputs()) || !o.train_inputs.empty() || !o.test_inputs.empty())
            return make_error(ErrorCode::kInvalidArgument,
                              "--train-data/--test-data feed one input: a model with several inputs reads its primary "
                              "input from --train-images/--test-images (or --data-dir) and the others from "
                              "--train-input/--test-input NAME=FILE.npy, or every input from CSV/TSV tables with "
                              "--input-columns NAME=COLUMN[,COLUMN...]");
        if (model.raw_ids)
            throw UsageError("--raw-ids: the model's first input " + o.description->input_name() +
                             " takes raw ids, read from .npy files (--train-images/--test-images IDS.npy with "
                             "--train-labels/--test-labels) or CSV/TSV tables (--input-columns), not --train-data " +
                             o.train_data);
        return load_from_data(o, model, *normalization);
    }
    auto data = files_given(o) ? load_from_files(o, *layout, model) : load_from_dir(o);
    if (!data) return data;
    const bool files = files_given(o);
    const std::string dir = resolved_data_dir(o);
    const SplitNames train_names = files ? split_names("train", {o.train_images, o.train_labels})
                                         : SplitNames{"train images in " + dir, "train labels in " + dir};
    const SplitNames test_names = files ? split_names("test", {o.test_images, o.test_labels})
                                        : SplitNames{"test images in " + dir, "test labels in " + dir};
    data->train.normalization = *normalization;
    data->test.normalization = *normalization;
    conform_to_model(data->train, model);
    conform_to_model(data->test, model);
    PSRUN_TRY(check_fits_model(data->train, train_names, model));
    PSRUN_TRY(check_fits_model(data->test, test_names, model));
    PSRUN_TRY(attach_columns(o, *data, train_names, test_names));
    data->train_description =
        std::to_string(data->train.size()) + " examples" + (data->train_mapped ? " (memory-mapped)" : "");
    data->test_description =
        std::to_string(data->test.size()) + " examples" + (data->test_mapped ? " (memory-mapped)" : "");
    return data;
}

std::unique_ptr<BatchSource> make_train_source(const Datasets& data, const TrainerConfig& config) {
    const auto batch = static_cast<std::size_t>(config.network.batch_size);
    if (data.train_stream) return make_stream_source(*data.train_stream, batch, config.seed, config.shard);
    if (data.train_mapped)
        return std::make_unique<MappedSource>(data.train_mapped, data.train.labels, data.train.normalization, batch,
                                              config.seed, config.shard);
    return std::make_unique<MemorySource>(data.train, batch, config.seed, config.shard);
}

std::unique_ptr<EvalSource> make_test_source(const Datasets& data) {
    if (data.test_stream) return make_stream_eval_source(*data.test_stream);
    if (data.test_mapped)
        return std::make_unique<MappedEvalSource>(data.test_mapped, data.test.labels, data.test.normalization);
    return std::make_unique<MemoryEvalSource>(data.test);
}

DataOptions data_options(const TrainOptions& o) {
    DataOptions d;
    d.train_data = o.train_data;
    d.test_data = o.test_data;
    d.validation_split = o.validation_split;
    d.inputs = split_list(o.inputs);
    d.targets = split_list(o.targets);
    auto resize = parse_resize_mode(o.image_resize);
    if (!resize) throw UsageError(resize.error().message);
    d.resize = *resize;
    auto corrupt = parse_corrupt_records(o.corrupt_records);
    if (!corrupt) throw UsageError(corrupt.error().message);
    d.corrupt = *corrupt;
    auto stream = parse_stream_mode(o.stream);
    if (!stream) throw UsageError(stream.error().message);
    d.stream = *stream;
    if (o.shuffle_buffer < 0) throw UsageError("--shuffle-buffer must be >= 0");
    if (o.prefetch < 1) throw UsageError("--prefetch must be >= 1");
    if (o.data_threads < 0) throw UsageError("--data-threads must be >= 0 (0: a quarter of the cores)");
    if (o.stream_memory_mb < 1) throw UsageError("--stream-memory-mb must be >= 1");
    d.shuffle_buffer = static_cast<std::size_t>(o.shuffle_buffer);
    d.prefetch = static_cast<std::size_t>(o.prefetch);
    d.threads = o.data_threads;
    d.stream_memory_mb = static_cast<std::size_t>(o.stream_memory_mb);
    return d;
}

DataRecord data_record(const TrainOptions& o, const Datasets& data) {
    DataRecord r;
    r.classes = data.class_names;
    if (!o.train_data.empty()) r.image_resize = o.image_resize;
    return r;
}

int data_error_exit_code(const Error& error) {
    return error.code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

}  // namespace psrun::worker
