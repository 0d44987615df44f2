// The geometry of a sliding window over H x W (conv2d and the pools): kernel, stride,
// dilation, pads and the output size, from the canonical "padding" option: "valid" (none),
// "same" (TF's rule: out = ceil(in / stride), the extra row/column at the end) or explicit
// [top, left, bottom, right] (ONNX's order). Pools may round the output size up (ceil_mode),
// which pads the end as far as the last window needs.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/nn/field_reader.h"

namespace psrun::nn {

class OnnxNodeImport;

struct Window2d {
    std::int64_t kh = 1, kw = 1;  // kernel (window) size
    std::int64_t sh = 1, sw = 1;  // stride
    std::int64_t dh = 1, dw = 1;  // dilation (conv2d)
    std::int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // pads
    std::int64_t oh = 0, ow = 0;  // output size
};

// Reads "padding" ("valid" by default) into attrs["padding"].
Result<void> parse_padding(FieldReader& reader, nlohmann::json& attrs);

// The window over an ih x iw input. `noun` names the kernel in errors ("kernel", "window").
// Errors (without location): an empty output, pads as large as the kernel.
Result<Window2d> plan_window(const nlohmann::json& padding, std::int64_t ih, std::int64_t iw, std::int64_t kh,
                             std::int64_t kw, std::int64_t sh, std::int64_t sw, std::int64_t dh, std::int64_t dw,
                             bool ceil_mode, const char* noun);

// The "padding" option of an ONNX Conv or pool node (opset 13): auto_pad SAME_UPPER -> "same",
// VALID or all-zero pads -> "valid", other pads -> [top, left, bottom, right]. Refuses (naming
// the node) SAME_LOWER and pads of another length.
Result<nlohmann::json> import_padding(OnnxNodeImport& node);

// True when the pads of `w` are TF's same split for its input size.
bool pads_are_same(const Window2d& w, std::int64_t ih, std::int64_t iw);

}  // namespace psrun::nn
