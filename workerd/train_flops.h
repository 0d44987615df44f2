// How much FMA work one trained example costs, so that a measured img/s can be set against the
// host's peak (common/peak_flops.h): the multiply-adds (2 FLOP each) each kind's schema counts
// (OpSchema::training_macs: conv2d, conv_transpose, dense per position on sequences, matmul,
// lstm/gru per time step) in the forward pass, the weight gradient and the data gradient (a
// matmul's two inputs). A data input that depends on no trainable tensor gets no gradient (the
// engine skips it: conv1 of mnist_deep).
// Bias adds, activations, pooling, dropout, the loss and the optimizer are not counted: they
// are memory-bound, not FMA work, and under 1% of the FLOP in the zoo's models.
#pragma once

#include "workerd/nn/model_description.h"

namespace psrun::worker {

struct TrainingFlops {
    double forward = 0;          // per example
    double weight_gradient = 0;  // per example
    double data_gradient = 0;    // per example
    double total() const { return forward + weight_gradient + data_gradient; }
};

// mnist_deep: 27.77 + 27.77 + 26.51 = 82.05 MFLOP per example.
TrainingFlops training_flops(const nn::ModelDescription& model);

}  // namespace psrun::worker
