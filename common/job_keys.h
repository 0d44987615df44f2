// Per-job secrets: the job token carried in every message header and the CURVE key pairs
// of the parameter servers and their clients. Stored in one text file of mode 0600, owned by
// the job's user (format in docs/protocol.md, "Job key file"):
//   # comment lines
//   format=1
//   token=<16 hex digits>
//   server_public=<40 Z85 chars>   server_secret=... client_public=... client_secret=...
// (one key=value per line). Functions are thread-safe; files are written atomically.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace psrun {

struct JobKeys {
    std::uint64_t token = 0;
    std::string server_public, server_secret;  // Z85, 40 chars each
    std::string client_public, client_secret;
};

// Fresh random token and two CURVE key pairs (zmq_curve_keypair). Errors if libzmq lacks CURVE.
[[nodiscard]] Result<JobKeys> generate_job_keys();

// Writes `keys` to `path` with mode 0600 via a temporary file and link(2): fails with kIo
// (message says so) if `path` already exists. Creates the parent directory (0700) if missing.
[[nodiscard]] Result<void> write_job_key_file(const std::string& path, const JobKeys& keys);

// Reads and validates a key file: regular file, owned by the effective user, no group/other
// permission bits, every field present and well-formed (see parse_job_keys).
[[nodiscard]] Result<JobKeys> read_job_key_file(const std::string& path);

// Parses a key file's text: '#' comments, key=value lines, format=1, token = exactly 16 hex
// digits (not 0), four CURVE keys of 40 Z85 characters. `path` only names the source in
// error messages (kInvalidArgument).
[[nodiscard]] Result<JobKeys> parse_job_keys(std::string_view text, const std::string& path);

// create = true (rank 0): generate and write the file unless it exists, then read it back
// (whoever won the race, every caller returns the same keys). create = false (other ranks):
// wait up to `timeout` for the file to appear and become valid, then read it.
[[nodiscard]] Result<JobKeys> ensure_job_key_file(const std::string& path, bool create,
                                                  std::chrono::milliseconds timeout);

// Default location: "<model_dir>/.psrun/job.key" when model_dir is set, else
// "$HOME/.psrun/<job_id>.key".
std::string default_job_key_path(const std::string& model_dir, const std::string& job_id);

}  // namespace psrun
