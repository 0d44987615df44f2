// `psrun model freeze` (docs/models.md "Buffers"): the kFrozenKey list (onnx_model.h) written
// into a file exported without it. torch.onnx writes a module's buffers (register_buffer:
// positional tables, normalisation constants, anchors) as initializers exactly like its
// parameters, so a file from a plain torch.onnx.export trains them unless they are listed.
// Pure: reads or edits the proto in memory; the caller reads and writes the files.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io {

// The initializers the file's kFrozenKey list names (empty without one). Errors
// (kInvalidArgument, "metadata psrun.frozen: ..."): a list that is no JSON list of names, an
// entry that is no float initializer of the graph.
Result<std::set<std::string>> frozen_initializers(const onnx::ModelProto& proto);

// Adds `names` to the file's kFrozenKey list, merged with what it already lists (each once, in
// the order of the graph's initializers), and returns the whole list. Errors (kInvalidArgument):
// no name given; a name that is no float initializer of the graph (naming some that are); a
// damaged list already in the file; a file psrun exported with its own description
// (kDescriptionKey), whose recorded tensors decide what trains.
Result<std::vector<std::string>> freeze_initializers(onnx::ModelProto& proto, const std::vector<std::string>& names);

}  // namespace psrun::onnx_io
