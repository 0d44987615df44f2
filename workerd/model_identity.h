// How a run names its model outside the worker: the id sent in HELLO (psd refuses a worker of
// another model) and the record kept in each checkpoint manifest (a resume with another model
// is refused; the evaluator rebuilds the network from it).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/wire.h"
#include "workerd/nn/model_description.h"

namespace psrun::worker {

// {name, architecture hash}.
wire::ModelId model_id(const nn::ModelDescription& model);

// {"name", "hash", "description": nn::model_json(model)}.
nlohmann::json model_record(const nn::ModelDescription& model);

// The model a checkpoint's record describes. `where` starts errors ("checkpoint D"). Errors:
// kInvalidArgument when the record has no description (a manifest older than model files:
// then `fallback`, the caller's model, is returned if its name matches) or the description
// does not parse or does not match its recorded hash.
[[nodiscard]] Result<nn::ModelDescription> model_from_record(const nlohmann::json& record, const std::string& where,
                                                             const nn::ModelDescription& fallback);

// "'mnist_deep' (architecture 1a2b3c4d5e6f)" for messages.
std::string describe_model(const nn::ModelDescription& model);

}  // namespace psrun::worker
