// The join file (<model-dir>/.psrun/join.json): what a worker needs to join a running job
// (`psrun join`, docs/reliability.md "Workers that join"): psd's endpoints, the key file, the run
// id the model dir lock admits, the map's worker count and psd's --max-workers. `psrun local`
// writes it when it starts psd with --max-workers above --workers, and `psrun run` for ps 0 under
// the same condition; it holds paths and endpoints, never key material. Pure but for the file I/O.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace psrun::launcher {

struct JoinInfo {
    std::string ps;        // comma-separated psd endpoints, psd i at position i
    std::string key_file;  // "" with no_auth
    bool no_auth = false;
    std::string auth;     // --auth mac|curve; "" for the default
    std::string run_id;   // the run that holds the model dir
    int num_workers = 0;  // the map's workers (>= 1)
    int max_workers = 0;  // psd's --max-workers (> num_workers)
};

std::string join_file_path(const std::string& model_dir);
std::string encode_join_info(const JoinInfo& info);  // JSON text
// Refuses malformed JSON, missing fields and counts out of range, naming `where`.
[[nodiscard]] Result<JoinInfo> decode_join_info(const std::string& text, const std::string& where);
// Writes the file atomically (creating <model-dir>/.psrun); reads it (kNotFound naming the path
// and what writes it when there is none).
[[nodiscard]] Result<void> write_join_info(const std::string& model_dir, const JoinInfo& info);
[[nodiscard]] Result<JoinInfo> read_join_info(const std::string& model_dir);
// The join file of a job whose psd command line is `psd_argv` (its --ps, --num-workers,
// --max-workers, --key-file/--no-auth, --auth, --run-id); nullopt when it leaves no room to join.
std::optional<JoinInfo> join_info_from_psd(const std::vector<std::string>& psd_argv);

}  // namespace psrun::launcher
