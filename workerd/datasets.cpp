#include "workerd/datasets.h"

#include "workerd/data/dataset_fetch.h"
#include "workerd/data/idx_reader.h"
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

Result<Datasets> load_from_dir(const TrainOptions& o) {
    const std::string dir = resolved_data_dir(o);
    auto train = load_split(dir, "train");
    auto test = train ? load_split(dir, "t10k") : Result<LabeledImages>();
    if (!train || !test)
        return make_error(ErrorCode::kNotFound,
                          (!train ? train.error() : test.error()).message +
                              " (run `psrun data fetch --dataset " + o.dataset +
                              (o.data_dir.empty() ? "" : " --data-dir " + o.data_dir) + "` first)");
    return Datasets{std::move(*train), std::move(*test), o.dataset};
}

}  // namespace

ModelInput model_input(const nn::ModelDescription& model) {
    // The example as C x H x W: [N, C, H, W] as it is, [N, A, B] as 1 x A x B (an LSTM over an
    // image's rows reads the same values), [N, F] as 1 x 1 x F.
    const auto& d = model.input.dims;
    const auto dim = [&](std::size_t i) { return static_cast<int>(i < d.size() ? d[i].value : 1); };
    ModelInput in{model.name, 1, 1, 1, static_cast<int>(model.classes)};
    if (d.size() == 4) in = ModelInput{model.name, dim(1), dim(2), dim(3), in.classes};
    else if (d.size() == 3) in = ModelInput{model.name, 1, dim(1), dim(2), in.classes};
    else if (d.size() == 2) in = ModelInput{model.name, 1, 1, dim(1), in.classes};
    return in;
}

Result<Datasets> load_datasets(const TrainOptions& o, const ModelInput& model) {
    auto normalization = parse_normalization(o.normalize);
    if (!normalization) throw UsageError(normalization.error().message);
    auto layout = parse_image_layout(o.image_layout);
    if (!layout) throw UsageError(layout.error().message);
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
    return data;
}

int data_error_exit_code(const Error& error) {
    return error.code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

}  // namespace psrun::worker
