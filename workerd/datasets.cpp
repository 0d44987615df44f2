#include "workerd/datasets.h"

#include "workerd/data/dataset_fetch.h"
#include "workerd/data/idx_reader.h"
#include "workerd/data/memory_source.h"
#include "workerd/data/split_files.h"

namespace psrun::worker {
namespace {

bool files_given(const TrainOptions& o) {
    return !o.train_images.empty() || !o.train_labels.empty() || !o.test_images.empty() ||
           !o.test_labels.empty();
}

Result<Datasets> load_from_files(const TrainOptions& o, ImageLayout layout) {
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
    auto train = load_split_files("train", {o.train_images, o.train_labels}, layout);
    if (!train) return tl::unexpected(train.error());
    auto test = load_split_files("test", {o.test_images, o.test_labels}, layout);
    if (!test) return tl::unexpected(test.error());
    d.train = std::move(*train);
    d.test = std::move(*test);
    return d;
}

// --train-data/--test-data: image folders, TFRecord files, tables.
Result<Datasets> load_from_data(const TrainOptions& o, const ModelInput& model, const Normalization& normalization) {
    if (!o.data_dir.empty() || files_given(o))
        throw UsageError("--train-data/--test-data exclude --data-dir and --train-images/--test-images: give one kind");
    auto loaded = load_data(data_options(o), model, normalization);
    if (!loaded) return tl::unexpected(loaded.error());
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
    if (auto ok = take(loaded->train, d.train, d.train_stream, d.train_examples, d.train_description, "train data",
                       o.train_data);
        !ok)
        return tl::unexpected(ok.error());
    if (auto ok = take(loaded->test, d.test, d.test_stream, d.test_examples, d.test_description, "test data",
                       o.test_data.empty() ? o.train_data : o.test_data);
        !ok)
        return tl::unexpected(ok.error());
    d.class_names = loaded->train.class_names;
    return d;
}

Result<Datasets> load_from_dir(const TrainOptions& o) {
    const std::string dir = resolved_data_dir(o);
    auto train = load_split(dir, "train");
    auto test = train ? load_split(dir, "t10k") : Result<LabeledImages>();
    if (!train || !test)
        return make_error(ErrorCode::kNotFound,
                          (!train ? train.error() : test.error()).message +
                              " (run `psrun data fetch --dataset " + o.dataset +
                              (o.data_dir.empty() ? "" : " --data-dir " + o.data_dir) + "` first)");
    Datasets d;
    d.train = std::move(*train);
    d.test = std::move(*test);
    d.name = o.dataset;
    return d;
}

}  // namespace

ModelInput model_input(const nn::ModelDescription& model) {
    return ModelInput{model.name, static_cast<int>(model.input.channels),
                      static_cast<int>(model.input.height), static_cast<int>(model.input.width),
                      static_cast<int>(model.classes)};
}

Result<Datasets> load_datasets(const TrainOptions& o, const ModelInput& model) {
    auto normalization = parse_normalization(o.normalize);
    if (!normalization) throw UsageError(normalization.error().message);
    auto layout = parse_image_layout(o.image_layout);
    if (!layout) throw UsageError(layout.error().message);
    if (!o.train_data.empty() || !o.test_data.empty()) return load_from_data(o, model, *normalization);
    auto data = files_given(o) ? load_from_files(o, *layout) : load_from_dir(o);
    if (!data) return data;
    const bool files = files_given(o);
    const std::string dir = resolved_data_dir(o);
    const SplitNames train_names =
        files ? split_names("train", {o.train_images, o.train_labels})
              : SplitNames{"train images in " + dir, "train labels in " + dir};
    const SplitNames test_names =
        files ? split_names("test", {o.test_images, o.test_labels})
              : SplitNames{"test images in " + dir, "test labels in " + dir};
    data->train.normalization = *normalization;
    data->test.normalization = *normalization;
    if (auto ok = check_fits_model(data->train, train_names, model); !ok)
        return tl::unexpected(ok.error());
    if (auto ok = check_fits_model(data->test, test_names, model); !ok)
        return tl::unexpected(ok.error());
    data->train_description = std::to_string(data->train.size()) + " examples";
    data->test_description = std::to_string(data->test.size()) + " examples";
    return data;
}

std::unique_ptr<BatchSource> make_train_source(const Datasets& data, const TrainerConfig& config) {
    const auto batch = static_cast<std::size_t>(config.network.batch_size);
    if (data.train_stream) return make_stream_source(*data.train_stream, batch, config.seed, config.shard);
    return std::make_unique<MemorySource>(data.train, batch, config.seed, config.shard);
}

std::unique_ptr<EvalSource> make_test_source(const Datasets& data) {
    if (data.test_stream) return make_stream_eval_source(*data.test_stream);
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
