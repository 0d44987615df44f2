// Slurm hostlist expansion ("n[01-03,7],gpu-a[1-2]" -> n01 n02 n03 n7 gpu-a1 gpu-a2).
// The syntax is checked here first, then libslurm's public slurm_hostlist_* API expands it,
// so our error messages are exact and libslurm's stderr noise never reaches the user.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace psrun::launcher {

// Upper bound on the number of hosts one list may expand to.
inline constexpr size_t kMaxHosts = 65536;

// Checks brackets (balanced, not nested, non-empty), ranges (low <= high, digits only) and
// characters; does not expand. Returns the host count the list will expand to.
[[nodiscard]] Result<size_t> check_hostlist(std::string_view list);

// Expands a hostlist in its written order, keeping zero padding. Errors (kInvalidArgument)
// name the offending part. Duplicate hosts are an error: a step never lists a node twice.
// Thread safety: libslurm's hostlist functions are reentrant; this briefly redirects stderr
// (fd 2) while libslurm runs, so do not call it concurrently with other stderr writers.
[[nodiscard]] Result<std::vector<std::string>> expand_hostlist(std::string_view list);

}  // namespace psrun::launcher
