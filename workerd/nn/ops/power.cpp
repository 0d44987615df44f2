// x raised to a computed power, numpy broadcasting (output: the broadcast shape):
//   {"kind": "power", "inputs": ["x", "y"]}: x^y element by element (torch.pow(x, y) of two
//     tensors, x ** p of a learned p: generalized-mean pooling). As in PyTorch: a negative x to a
//     non-integer y is NaN; dL/dx = dL/dz y x^(y-1), 0 where y = 0; dL/dy = dL/dz x^y ln x, 0
//     where x = 0 and y >= 0 (NaN where x < 0); each summed over the axes its input broadcasts
//     along.
// Floats only; no fields, no tensors. FLOPs: 1 per output element.
// A constant scalar exponent is the "pow" kind (math.cpp), a positive constant base exp(y ln c):
// ONNX's Pow imports through math.cpp and becomes this kind only where neither holds.
// ONNX: exported as Pow.
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/broadcast.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> infer_power(InferContext& context) {
    Dims dims = context.input(0).dims;
    for (std::size_t i = 0; i < 2; ++i) {
        if (context.input(i).type != ElementType::kFloat)
            return tl::unexpected(op_error("input " + std::to_string(i) + " (" + context.input_name(i) +
                                           ") holds integers: a power takes floats (cast it)"));
        PSRUN_TRY_ASSIGN(auto d, broadcast_dims(dims, context.input(i).dims));
        dims = d;
    }
    if (dims.size() > 6) return tl::unexpected(op_error("the output would have more than 6 dims"));
    context.set_output(0, ValueInfo{dims, ElementType::kFloat});
    context.add_flops(static_cast<double>(elements_per_example(dims).value_or(0)));
    return {};
}

Result<void> export_power(OnnxNodeExport& out) {
    out.add("Pow", {out.input(0), out.input(1)}, {out.output(0)}, {}, out.node().name);
    return {};
}

}  // namespace

const OpSchema& power_schema() {
    static const OpSchema s{"power", 2, 2, parse_no_attributes, infer_power, {}, nullptr, export_power};
    return s;
}

}  // namespace psrun::nn
