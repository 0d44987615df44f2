// Text from outside (folder names, ONNX graph names, CSV values) made fit for JSON, which holds
// only UTF-8: names that reach summary.json, class_names.json, checkpoint manifests or an
// export's embedded description pass through valid_utf8() first.
#pragma once

#include <string>
#include <string_view>

namespace psrun {

// `text` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD (EF BF BD);
// valid text comes back unchanged. Thread-safe.
std::string valid_utf8(std::string_view text);

}  // namespace psrun
