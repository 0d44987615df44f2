// A model dir every shard really shares (docs/reliability.md "A shared model dir").
//
// Before training starts the chief proves that every psd sees the directory it sees:
//   1. the chief writes <model-dir>/.psrun/dircheck/chief.<nonce> (a fresh random nonce);
//   2. DIRCHECK(dir, nonce) to every psd: each reads that file through its own view of the model
//      dir (its --model-dir, else the chief's path) and writes ps-<i>.<nonce> beside it;
//   3. the chief reads every ps-<i>.<nonce> back, then removes the files.
// A node with a node-local path ($TMPDIR, a local scratch disk) fails step 2 or 3, before step 1
// of training. On one host both always pass.
#pragma once

#include <cstdint>
#include <string>

#include "common/ps_client.h"
#include "common/result.h"

namespace psrun {

// Chief side: steps 1-3 over every shard of `client` (REQUIRES: client.hello() done).
// kInvalidArgument when a shard sees another directory: the message names the shard, its host
// or endpoint, the path and the fix.
[[nodiscard]] Result<void> verify_shared_model_dir(PsClient& client, const std::string& model_dir);

// psd side of step 2. `own_view` is psd's --model-dir (empty: the chief's path is psd's view).
// The error names this host, both paths and the fix.
[[nodiscard]] Result<void> answer_dir_check(const std::string& own_view, const std::string& chief_dir,
                                            const std::string& nonce, std::uint32_t ps_index);

}  // namespace psrun
