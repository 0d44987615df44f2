// Text from outside (folder names, ONNX graph names, CSV values, paths) made fit for JSON, which
// holds only UTF-8: names that reach summary.json, class_names.json, checkpoint manifests or an
// export's embedded description pass through valid_utf8() first, and records are written with
// json_text().
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace psrun {

// `text` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD (EF BF BD);
// valid text comes back unchanged. Thread-safe.
std::string valid_utf8(std::string_view text);

// `j` as JSON text (indent < 0: one line, as dump()), with the bytes of any string in it that
// are not valid UTF-8 written as U+FFFD instead of throwing, as nlohmann's dump() does: a path
// or name from outside (a file name in another encoding) cannot stop a record being written.
// Every record psrun writes or prints goes through this.
std::string json_text(const nlohmann::json& j, int indent = -1);

}  // namespace psrun
