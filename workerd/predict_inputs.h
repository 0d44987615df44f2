// The examples `psrun predict --images F...` classifies. A model taking token ids or feature
// vectors reads .npy arrays of one row per example (integer ids: N x L; features: N x F), as
// training reads them (workerd/data/split_files.h). An image model reads each file by its
// content (gzip either way): IDX (as MNIST ships), NumPy .npy (uint8 or float32; shape (N, H, W),
// (N, C, H, W), (N, H, W, C) or (N, C*H*W) flattened, as the model's input needs), or one image
// per JPEG, PNG or PGM file. Pixels are then converted exactly as training converts them (uint8 /
// 255, float32 as stored: workerd/data/batch_fill.h). Every image must have the model's input
// shape, unless a resize mode is given: then single images are fitted to it as training from
// --train-data fits them (workerd/data/image_resize.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/image_resize.h"
#include "workerd/data/labeled_images.h"

namespace psrun::worker {

struct PredictInputs {
    LabeledImages images;            // every label 0 (none are known)
    std::vector<std::string> names;  // per image: its file for a PNG/PGM, else empty (name it by index)
    std::vector<std::string> notes;  // conversions worth telling the user ("F: colour PNG read as gray")
};

// Reads every file in order into one array. Errors (kInvalidArgument, naming the file and
// saying what would be accepted): unreadable or missing file, a format none of the above, a
// damaged file, an image shape other than model's channels x height x width (for single images
// only without `resize`). A colour image for a 1-channel model is converted to gray (noted), as
// is a gray one for a 3-channel model.
[[nodiscard]] Result<PredictInputs> load_predict_inputs(const std::vector<std::string>& paths, const ModelInput& model,
                                                        std::optional<ResizeMode> resize = std::nullopt);

}  // namespace psrun::worker
