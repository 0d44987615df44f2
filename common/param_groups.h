// --param-group PATTERN:KEY=VALUE[,KEY=VALUE]: one parameter group (common/optimizer.h ParamGroup)
// as the command line, the checkpoint manifest and summary.json write it. Keys: lr_mult (the
// learning-rate multiplier, a finite number >= 0) and weight_decay (a finite number >= 0); at least
// one. PATTERN is a non-empty fnmatch glob over tensor names without ':' ("*/b", "bn*", "fc2/*").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/optimizer.h"
#include "common/result.h"

namespace psrun {

// kInvalidArgument naming the part that is wrong and the form expected.
[[nodiscard]] Result<ParamGroup> parse_param_group(std::string_view text);
// "PATTERN:lr_mult=M[,weight_decay=W]", the form parse_param_group reads.
std::string to_string(const ParamGroup& group);

// [{"pattern": P, "lr_multiplier": M, "weight_decay": W (only when the group sets it)}, ...]
nlohmann::json to_json(const std::vector<ParamGroup>& groups);
// The inverse; kInvalidArgument for anything else (values as parse_param_group requires them).
[[nodiscard]] Result<std::vector<ParamGroup>> param_groups_from_json(const nlohmann::json& value);

}  // namespace psrun
