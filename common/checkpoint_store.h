// Atomic, self-verifying checkpoints in a model directory:
//   <model-dir>/ckpt-<step, 10 digits>/manifest.json + the files it lists (tensor files)
//   <model-dir>/checkpoint   JSON state file {"latest": "...", "all": [...]}, replaced atomically
// A checkpoint is written into a hidden temporary directory, every file and the directory are
// fsynced, then it is renamed into place: a crash or a full disk never leaves a half-written
// checkpoint under a ckpt- name, and the previous checkpoints stay valid.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace psrun {

struct CheckpointInfo {
    std::int64_t step = 0;
    std::string dir;  // absolute or model-dir-relative path of the committed directory
};

// A checkpoint being written. Other processes (psd shards) may write files into dir() on a
// shared filesystem before commit(). Destroying it uncommitted removes the directory.
// Move-only; not thread-safe.
class PendingCheckpoint {
  public:
    PendingCheckpoint(std::string model_dir, std::string tmp_dir, std::int64_t step, int keep);
    PendingCheckpoint(PendingCheckpoint&& other) noexcept;
    PendingCheckpoint& operator=(PendingCheckpoint&&) = delete;
    ~PendingCheckpoint();

    const std::string& dir() const { return tmp_dir_; }
    std::int64_t step() const { return step_; }

    // Writes manifest.json (adding "step" and "files": every regular file present), fsyncs all
    // files and the directory, renames it to ckpt-<step>, updates the state file and prunes
    // to the newest `keep` checkpoints and the full ones their differential sparse-table pieces
    // build on (common/row_delta.h). On failure nothing visible changes.
    [[nodiscard]] Result<CheckpointInfo> commit(nlohmann::json manifest);

  private:
    std::string model_dir_;
    std::string tmp_dir_;
    std::int64_t step_;
    int keep_;
    bool done_ = false;
};

class CheckpointStore {
  public:
    // keep: how many committed checkpoints to retain (>= 1).
    CheckpointStore(std::string model_dir, int keep);

    // Creates the temporary directory for a checkpoint of `step`. Creates model_dir if needed.
    [[nodiscard]] Result<PendingCheckpoint> begin(std::int64_t step) const;

    // Committed checkpoints, oldest first (directories named ckpt-<step> with a manifest).
    std::vector<CheckpointInfo> list() const;

    // The newest checkpoint whose manifest and every listed tensor file verify, and those of the
    // checkpoints its differential pieces build on (common/row_delta.h). Each damaged
    // newer checkpoint adds a warning naming the file and the problem. kNotFound if none.
    [[nodiscard]] Result<CheckpointInfo> latest_valid(std::vector<std::string>* warnings) const;

    // Reads a committed checkpoint's manifest (checked by parse_manifest).
    [[nodiscard]] static Result<nlohmann::json> read_manifest(const CheckpointInfo& info);

    // Parses manifest.json text: a JSON object whose "files" is an array of plain file names
    // (non-empty, no '/', not "." or ".."; a manifest never points outside its directory).
    // kInvalidArgument otherwise; `path` only names the source in error messages.
    [[nodiscard]] static Result<nlohmann::json> parse_manifest(std::string_view text, const std::string& path);

  private:
    std::string model_dir_;
    int keep_;
};

// "ckpt-<step, 10 digits>": the name a committed checkpoint of `step` has in its model dir.
std::string checkpoint_dir_name(std::int64_t step);

// Writes `text` to `path` atomically (temp file, fsync, rename, fsync of the directory).
[[nodiscard]] Result<void> write_file_atomically(const std::string& path, const std::string& text);

}  // namespace psrun
