// The geometry of a sliding window over H x W (conv2d and the pools): kernel, stride,
// dilation, pads and the output size, from the canonical "padding" option: "valid" (none),
// "same" (TF's rule: out = ceil(in / stride), the extra row/column at the end) or explicit
// [top, left, bottom, right] (ONNX's order). Pools may round the output size up (ceil_mode),
// which pads the end as far as the last window needs.
//
// 1-D nodes (conv2d and the pools over N x C x L): a kernel or window written as [k] makes the
// node 1-D; its stride and dilation are then s | [s], its padding "valid" | "same" | [left,
// right]. Its window is planned as a 2-D one with H = 1 (kh = sh = dh = 1, pt = pb = 0, oh = 1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/nn/field_reader.h"
#include "workerd/nn/tensor_shape.h"

namespace psrun::nn {

class OnnxNodeImport;

struct Window2d {
    std::int64_t kh = 1, kw = 1;  // kernel (window) size
    std::int64_t sh = 1, sw = 1;  // stride
    std::int64_t dh = 1, dw = 1;  // dilation (conv2d)
    std::int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // pads
    std::int64_t oh = 0, ow = 0;  // output size
};

// Reads "padding" ("valid" by default) into attrs["padding"]; explicit pads have 2 * spatial
// entries ([top, left, bottom, right] or [left, right]).
Result<void> parse_padding(FieldReader& reader, nlohmann::json& attrs, int spatial = 2);

// True when `field` is a one-element list (the node is 1-D).
bool is_1d_field(FieldReader& reader, std::string_view field);
// The 1-D form of FieldReader::extent: an integer or [v], in [1, max].
Result<std::int64_t> read_extent1(FieldReader& reader, std::string_view field, std::optional<std::int64_t> fallback,
                                  std::int64_t max);

// The window over an ih x iw input. `noun` names the kernel in errors ("kernel", "window").
// Errors (without location): an empty output, pads as large as the kernel.
Result<Window2d> plan_window(const nlohmann::json& padding, std::int64_t ih, std::int64_t iw, std::int64_t kh,
                             std::int64_t kw, std::int64_t sh, std::int64_t sw, std::int64_t dh, std::int64_t dw,
                             bool ceil_mode, const char* noun);

// The window of a node with kernel.size() (1 or 2) spatial axes over `in` (N x C x L or
// N x C x H x W; checked by the caller); stride and dilation have an entry per axis.
Result<Window2d> plan_window_nd(const nlohmann::json& padding, const ValueInfo& in, const std::vector<std::int64_t>& kernel,
                                const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& dilation,
                                bool ceil_mode, const char* noun);

// The output's spatial dims: {OH, OW}, or {OL} for spatial 1.
std::vector<std::int64_t> window_out_dims(const Window2d& w, int spatial);

// The "padding" option of an ONNX Conv or pool node (opset 13): auto_pad SAME_UPPER -> "same",
// VALID or all-zero pads -> "valid", other pads -> [top, left, bottom, right] ([left, right]
// for spatial 1). Refuses (naming the node) SAME_LOWER and pads of another length.
Result<nlohmann::json> import_padding(OnnxNodeImport& node, int spatial = 2);

// The ONNX ints attribute `name` that must have `spatial` entries (one per axis; pads: two):
// `fallback` for each when absent; refuses another length.
Result<std::vector<std::int64_t>> spatial_attr(OnnxNodeImport& node, const char* name, std::size_t spatial,
                                               std::int64_t fallback);

// True when the pads of `w` are TF's same split for its input size.
bool pads_are_same(const Window2d& w, std::int64_t ih, std::int64_t iw);

}  // namespace psrun::nn
