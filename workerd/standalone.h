// `workerd --standalone`: trains with the local optimizer (no psd), logs a progress line, and
// writes <model-dir>/summary.json. SIGINT/SIGTERM stop it after the current step (the summary is
// still written). Call block_termination_signals() first.
#pragma once

#include "workerd/train_options.h"

namespace psrun::worker {

class StandaloneTrainer {
  public:
    explicit StandaloneTrainer(TrainOptions options);
    // Returns the process exit code. Throws UsageError on bad options; runtime failures (missing
    // data, unwritable model dir) are logged and return kExitFailure.
    int run();

  private:
    TrainOptions options_;
};

}  // namespace psrun::worker
