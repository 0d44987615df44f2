// Global-norm gradient clipping (--clip-global-norm C, tf.clip_by_global_norm, torch's
// clip_grad_norm_): the L2 norm over every piece of one gradient together, and all pieces
// scaled by min(1, C / norm). A worker's pieces are its trainable tensors' slices of the
// gradient buffer and, with a sparse table, the gradient rows it pushes (Trainer::row_grads()),
// so a row counts once whichever way the table lives. Pure: no state, no threads of its own
// (large pieces are summed on the OpenMP threads).
#pragma once

#include <span>

namespace psrun::worker {

struct GlobalNorm {
    double norm = 0;       // over all pieces, before clipping
    bool clipped = false;  // the pieces were scaled by limit / norm
};

// Computes the norm of `pieces` together and, when it is finite and above `limit` (> 0), scales
// every element by limit / norm. A non-finite norm leaves the pieces alone.
GlobalNorm clip_by_global_norm(std::span<const std::span<float>> pieces, double limit);

}  // namespace psrun::worker
