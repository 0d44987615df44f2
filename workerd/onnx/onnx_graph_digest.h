// A fingerprint of what an ONNX graph computes, so that a psrun export's recorded description
// (kDescriptionKey) is trusted only for the graph it was written with. `psrun export` stores it
// under kGraphDigestKey; import_onnx recomputes it and, when the graph was edited after export
// (an op changed, a node added, a constant rewritten with onnx.helper), imports the graph
// instead of the description. Thread-safe (pure functions).
#pragma once

#include <set>
#include <string>

#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io {

// The metadata key of the digest: "fnv1a64:" and 16 hex digits.
inline constexpr const char* kGraphDigestKey = "psrun.graph";

// FNV-1a (common/fnv1a.h) over the graph's inputs (name, element type, dims), outputs (names),
// nodes in order (domain, op type, inputs, outputs, attributes; not their names, which are
// cosmetic) and the initializers that are not `parameters` (constants: name, type, dims,
// values). Parameters are left out: training changes them, and the importer checks their names
// and shapes against the description itself. Same value on every host and build.
std::string graph_digest(const onnx::GraphProto& graph, const std::set<std::string>& parameters);

}  // namespace psrun::onnx_io
