// The model's inputs after the first, fed from .npy files (docs/models.md "Several inputs"):
// `--train-input NAME=FILE.npy` and `--test-input NAME=FILE.npy`, one per extra input, each file
// one row per example of its split (as many rows as the split's labels), in example order.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "workerd/data/labeled_images.h"
#include "workerd/nn/model_description.h"

namespace psrun::worker {

// Loads the columns of `model`'s inputs after the first (in model order) from `args`
// ("NAME=FILE.npy", given with `option`, e.g. "--train-input"). Float inputs take any float or
// integer dtype (as float32), int inputs integer dtypes; each row holds the input's per-example
// values. `rows` is the split's example count and `rows_from` names where it came from (the
// labels file). Errors (kInvalidArgument, naming the option, the input and the files): a bad
// argument, a name that is not one of the model's extra inputs, an input given twice or not at
// all, an unreadable file, a file whose rows are not examples of the input or whose row count
// is not `rows`, an id of an int input outside the smallest table of the embeddings that read it
// (dense or sparse; naming the file, the example and the position, as the primary input's check
// does when its data is loaded). A single-input model with no args gives no columns. The inputs
// named in `raw_inputs` (read by tables keyed by raw ids, --raw-ids) take integer dtypes as exact
// 64-bit raw ids (InputColumn::u64), with no vocabulary. The inputs named in `zeros_when_absent`
// may be left out: each is then a column of zeros (psrun predict: a segmentation's masks, which
// only its loss reads).
[[nodiscard]] Result<std::vector<InputColumn>> load_input_columns(
    const nn::ModelDescription& model, const std::vector<std::string>& args, std::string_view option, std::size_t rows,
    const std::string& rows_from, const std::vector<std::string>& raw_inputs = {},
    const std::vector<std::string>& zeros_when_absent = {});

}  // namespace psrun::worker
