// One split (train or test) given as files on the command line (--train-images F --train-labels F,
// see docs/data.md): the format of each file is chosen by its content, not its name: "\x93NUMPY"
// starts a .npy file, anything else is read as IDX (gzip either way). CIFAR batches have no magic,
// so they are named by a prefix instead: "cifar10:F1,F2,...", "cifar100:F,..." (fine labels) or
// "cifar100-coarse:F,..." as the images value, with no labels file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/labeled_images.h"
#include "workerd/data/npy_reader.h"

namespace psrun::worker {

struct SplitFiles {
    std::string images;  // a path, or "cifar10:..." etc.
    std::string labels;  // a path; empty for CIFAR
};

// Images from an IDX or .npy file (by content); errors name the file. `expect`: the model's
// image dims, which decide a .npy array's layout where `layout` is kAuto and only one fits.
[[nodiscard]] Result<ImageArray> read_images_file(const std::string& path, ImageLayout layout,
                                                  const ImageDims* expect = nullptr);
// Labels from an IDX or .npy file (by content).
[[nodiscard]] Result<std::vector<std::int32_t>> read_labels_file(const std::string& path);

// "train images F" / "train labels L" (for CIFAR both name the images value).
SplitNames split_names(const std::string& split, const SplitFiles& files);

// The inputs of one split from `path` into `out` as `model` takes them: images (IDX or .npy,
// `layout`), or a .npy array of one row per example: token ids (integers) for a tokens model,
// feature vectors (any numeric dtype) for a features model; with `model.raw_ids`, raw 64-bit ids
// (LabeledImages::raw_tokens). Errors name the file.
[[nodiscard]] Result<void> load_example_inputs(const std::string& path, const ModelInput& model, ImageLayout layout,
                                               LabeledImages& out);
// Loads a split and checks that it holds as many labels as images. `split` ("train" or "test")
// only appears in messages. Every error is kInvalidArgument and names the file (a missing file
// too: it is a wrong option value). With `model` given and taking other than images and class
// labels, the files are .npy arrays of one row per example read for it (workerd/data/npy_values.h):
// feature vectors (any numeric dtype), token ids (integers), target vectors (any numeric dtype).
[[nodiscard]] Result<LabeledImages> load_split_files(const std::string& split, const SplitFiles& files,
                                                     ImageLayout layout, const ModelInput* model = nullptr);

}  // namespace psrun::worker
