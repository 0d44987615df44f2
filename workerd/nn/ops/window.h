// The geometry of a sliding window over H x W (conv2d and the pools): kernel, stride,
// dilation, pads and the output size, from the canonical "padding" option: "valid" (none),
// "same" (TF's rule: out = ceil(in / stride), the extra row/column at the end) or explicit
// [top, left, bottom, right] (ONNX's order). Pools may round the output size up (ceil_mode),
// which pads the end as far as the last window needs.
//
// 1-D nodes (conv2d and the pools over N x C x L): a kernel or window written as [k] makes the
// node 1-D; its stride and dilation are then s | [s], its padding "valid" | "same" | [left,
// right]. Its window is planned as a 2-D one with H = 1 (kh = sh = dh = 1, pt = pb = 0, oh = 1).
//
// 3-D nodes (conv2d and the pools over N x C x D x H x W, PyTorch's Conv3d / MaxPool3d /
// AvgPool3d): a kernel or window written as [kd, kh, kw]; stride and dilation s | [sd, sh, sw],
// padding "valid" | "same" | [front, top, left, back, bottom, right] (ONNX's order: the begins of
// D, H, W, then their ends). The window's depth axis (kd, sd, dd, pf, pk, od) is planned by the
// same per-axis rule as H and W; 1-D and 2-D windows keep it 1 deep (kd = sd = dd = od = 1, no pads).
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

// The window of any node above (the name is the 2-D one's; the depth axis is its 3-D part).
struct Window2d {
    std::int64_t kh = 1, kw = 1;                  // kernel (window) size
    std::int64_t sh = 1, sw = 1;                  // stride
    std::int64_t dh = 1, dw = 1;                  // dilation (conv2d)
    std::int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // pads
    std::int64_t oh = 0, ow = 0;                  // output size
    // The depth axis of a 3-D window (last, so that the 2-D aggregate initialisers stay valid).
    std::int64_t kd = 1, sd = 1, dd = 1;
    std::int64_t pf = 0, pk = 0;  // front and back pads
    std::int64_t od = 1;
};

// Reads "padding" ("valid" by default) into attrs["padding"]; explicit pads have 2 * spatial
// entries ([top, left, bottom, right], [left, right], or the 6 of a 3-D window).
Result<void> parse_padding(FieldReader& reader, nlohmann::json& attrs, int spatial = 2);

// True when `field` is a one-element list (the node is 1-D).
bool is_1d_field(FieldReader& reader, std::string_view field);
// True when `field` is a three-element list (the node is 3-D).
bool is_3d_field(FieldReader& reader, std::string_view field);
// A 3-D window field: an integer v (-> [v, v, v]) or [d, h, w], each in [1, max].
Result<std::vector<std::int64_t>> read_extent3(FieldReader& reader, std::string_view field,
                                               std::optional<std::vector<std::int64_t>> fallback, std::int64_t max);
// The 1-D form of FieldReader::extent: an integer or [v], in [1, max].
Result<std::int64_t> read_extent1(FieldReader& reader, std::string_view field, std::optional<std::int64_t> fallback,
                                  std::int64_t max);

// The window over an ih x iw input. `noun` names the kernel in errors ("kernel", "window").
// Errors (without location): an empty output, pads as large as the kernel.
Result<Window2d> plan_window(const nlohmann::json& padding, std::int64_t ih, std::int64_t iw, std::int64_t kh,
                             std::int64_t kw, std::int64_t sh, std::int64_t sw, std::int64_t dh, std::int64_t dw,
                             bool ceil_mode, const char* noun);

// The window of a node with kernel.size() (1, 2 or 3) spatial axes over `in` (N x C x L,
// N x C x H x W or N x C x D x H x W; checked by the caller); stride and dilation have an entry
// per axis. Errors (without location) name the whole window (e.g. "kernel 3x3x3").
Result<Window2d> plan_window_nd(const nlohmann::json& padding, const ValueInfo& in,
                                const std::vector<std::int64_t>& kernel, const std::vector<std::int64_t>& stride,
                                const std::vector<std::int64_t>& dilation, bool ceil_mode, const char* noun);

// The output's spatial dims: {OH, OW}, {OL} for spatial 1, {OD, OH, OW} for spatial 3.
std::vector<std::int64_t> window_out_dims(const Window2d& w, int spatial);

// The "padding" option of an ONNX Conv or pool node (opset 13): auto_pad SAME_UPPER -> "same",
// VALID or all-zero pads -> "valid", other pads -> [top, left, bottom, right] ([left, right]
// for spatial 1, ONNX's 6 for spatial 3). Refuses (naming the node) SAME_LOWER and pads of another length.
Result<nlohmann::json> import_padding(OnnxNodeImport& node, int spatial = 2);

// The ONNX ints attribute `name` that must have `spatial` entries (one per axis; pads: two):
// `fallback` for each when absent; refuses another length.
Result<std::vector<std::int64_t>> spatial_attr(OnnxNodeImport& node, const char* name, std::size_t spatial,
                                               std::int64_t fallback);

// The explicit pads of `w` in ONNX's order for `spatial` axes ([pl, pr], [pt, pl, pb, pr], or
// [pf, pt, pl, pk, pb, pr]).
std::vector<std::int64_t> window_onnx_pads(const Window2d& w, int spatial);
// Its kernel, stride and dilation with one entry per axis (depth first).
std::vector<std::int64_t> window_kernel(const Window2d& w, int spatial);
std::vector<std::int64_t> window_strides(const Window2d& w, int spatial);
std::vector<std::int64_t> window_dilations(const Window2d& w, int spatial);

// True when the pads of `w` are TF's same split for its input size.
bool pads_are_same(const Window2d& w, std::int64_t ih, std::int64_t iw);

}  // namespace psrun::nn
