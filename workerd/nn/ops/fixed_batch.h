// What a file of fixed batch size means in its shape constants (ONNX import). torch.onnx.export
// without dynamic_axes fixes the inputs' batch at the example input's size B and writes the shapes
// it computed from that batch as constants: x.view(x.size(0), -1) as a Reshape to [B, -1],
// nn.MultiheadAttention's view(L, B * heads, d) and view(L * B, E), a class token's
// expand(x.size(0), -1, -1) as an Expand to [B, 1, 1]. These functions read such a constant back
// as the batch-dependent shape it was, where the reading is exact at batch B; psrun then warns
// (onnx_import_advice.h, fixed_batch_warning). Pure functions of shapes: no state, any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "workerd/nn/tensor_shape.h"

namespace psrun::nn {

// A Reshape of `data` (one batch axis N or kN) to `target` (plain entries, ONNX's 0 = copy and -1 =
// the rest, as a constant of the file) for a file of fixed batch `b` >= 1: the target with the one
// axis that holds the batch's values written as a multiple of N, or nullopt when the target has
// no such reading (it is then what it is: an error or a shape without the batch).
//  - b >= 2: the target is resolved at batch b (0 and -1 made numbers), and the axis is the one
//    j that holds the batch: the product of target[0..j) divides the values before the data's
//    batch axis P, and the product of target[0..j] is a multiple of P x b; target[j] = m x b
//    becomes mN. A kN axis holds the batch after some `outer` of its k, unknown here: outer = 1
//    is tried first (view(L, b * heads, d) puts the batch outside the heads), then the other
//    divisors of k in order (view(L * b, E) read back by view(L, b, E): the batch inside L). The
//    reading is exact at batch b whichever j it takes; it scales the axis whose values hold the
//    batch's, as the file's code scaled it.
//  - b == 1: the first, most likely, of reshape_readings_at_batch_one's readings.
std::optional<Dims> reshape_target_at_fixed_batch(const Dims& data, const Dims& target, std::int64_t b);

// At a fixed batch of 1 a target says nothing of where the batch was: view(L, 1 * heads, d) is
// [L, heads, d]. Every reading exact at batch 1 is one axis j whose values hold the batch's: the
// product of target[0..j) divides the data's values before its batch axis P (times an outer
// part of a kN axis) and the product of target[0..j] is a multiple of it; target[j] becomes
// target[j] N. All such readings, most likely first, as torch writes its shapes:
//  1. an axis of 1 just after P (view(b, -1), view(L, b, E): the batch's own axis);
//  2. the axis that starts just after P, when it is not the last (view(L, b * heads, d): the
//     batch outside the heads);
//  3. the others by position, the last axis last (view(L * b, E): the batch inside L; the
//     features rarely hold it).
// Readings differ only beyond batch 1, so the file cannot choose: the importer takes the first
// and walks the graph again with the next where the walk fails (onnx_import.cpp). Empty when
// the target resolves to no reading.
std::vector<Dims> reshape_readings_at_batch_one(const Dims& data, const Dims& target);

// An Expand of `data` (no batch axis: a parameter) to `shape` for a file of fixed batch `b`:
// b >= 2: the one entry of `shape` equal to b where the data's dim (aligned from the right) is 1
// or absent becomes N (a class token's expand(b, -1, -1) to [b, 1, 1], an LSTM's learned initial
// state expand(1, b, H)); none or several: nullopt. b == 1: the first of
// expand_readings_at_batch_one's readings.
std::optional<Dims> expand_shape_at_fixed_batch(const Dims& data, const Dims& shape, std::int64_t b);

// At a fixed batch of 1, each entry 1 of `shape` over a data's dim of 1 (or none) may have been
// the batch: one reading per such entry with it N, the first axis first (a class token's
// expand(b, -1, -1)), then by position (an LSTM's h0.expand(1, b, H)); the importer walks the
// graph again with the next where a walk fails. Empty for data with a batch axis.
std::vector<Dims> expand_readings_at_batch_one(const Dims& data, const Dims& shape);

// The shape of a ConstantOfShape (torch.zeros(x.size(0), H), an RNN's zero initial state
// zeros(layers, b, H)) for a file of fixed batch `b` >= 2, of rank 2 or more: the one entry equal
// to b becomes N; none or several (zeros(2, 2, H) at b = 2), rank 1 (a vector of b values is a
// shape or an index list far more often than a batch) or b == 1: nullopt.
std::optional<Dims> fill_shape_at_fixed_batch(const Dims& shape, std::int64_t b);

// At a fixed batch of 1, a fill of rank 2 or more (torch.zeros(b, H) is [1, H]): one reading per
// axis of size 1 with it N, by position. The importer tries the fill as written (no batch) first,
// then these where a walk fails. Empty for rank 1 or no axis of 1.
std::vector<Dims> fill_readings_at_batch_one(const Dims& shape);

}  // namespace psrun::nn
