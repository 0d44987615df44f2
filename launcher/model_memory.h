// `psrun model show`'s training memory: the engine built for training at a batch size (f32,
// zero parameters: sizes do not depend on the values), and what its activations, their
// gradients and its temporaries take with the buffer plan and with one buffer each
// (nn::MemoryUse, workerd/nn/network.h), in total and per example.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/nn/model_description.h"
#include "workerd/nn/network.h"

namespace psrun::launcher {

// Errors: the engine's (a model it cannot build: kUnsupported). REQUIRES: batch >= 1.
Result<nn::MemoryUse> training_memory(const nn::ModelDescription& model, std::int64_t batch);

// "training memory (activations, their gradients, temporaries; batch 128, f32): planned 6.1 MB
// = 47.9 KB per example; one buffer each 20.3 MB = 158.5 KB per example".
std::string training_memory_text(const nn::MemoryUse& use, std::int64_t batch);
// {"batch": B, "planned": bool, "planned_bytes", "unplanned_bytes", "lower_bound_bytes",
//  "planned_bytes_per_example", "unplanned_bytes_per_example"}.
nlohmann::json training_memory_json(const nn::MemoryUse& use, std::int64_t batch);

}  // namespace psrun::launcher
