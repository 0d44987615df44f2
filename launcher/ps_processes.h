// Helpers for the psd-related psrun commands (bench ps, stop): locating the psd binary,
// running psd child processes, temp dirs and free loopback ports.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/result.h"

namespace psrun::launcher::ps_tools {

// psd next to this executable: $PSRUN_BIN_DIR or bin_dir if set, else <exe dir>/../psd/psd
// (build tree), else <exe dir>/psd (installed).
[[nodiscard]] Result<std::string> find_psd_binary(const std::string& bin_dir);

// A free TCP port on 127.0.0.1 (bound and released; another process could take it meanwhile).
[[nodiscard]] Result<int> free_tcp_port();

// A private (0700) temporary directory, PREFIX.XXXXXX in $TMPDIR, removed with its contents on
// destruction. Throws std::runtime_error when it cannot be created.
class TempDir {
  public:
    explicit TempDir(const std::string& prefix = "psrun");
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }

  private:
    std::string path_;
};

// A psd child process (stdout/stderr inherited, signals unblocked). Destruction stops a still
// running child: SIGTERM, then SIGKILL after 5 s. Move-only.
class PsdProcess {
  public:
    PsdProcess(const std::string& exe, const std::vector<std::string>& args);
    PsdProcess(PsdProcess&& other) noexcept;
    PsdProcess& operator=(PsdProcess&&) = delete;
    ~PsdProcess();
    pid_t pid() const { return pid_; }
    // Exit code, 128+signal if killed, or -1 if still running after `seconds`.
    int wait(double seconds);
    double peak_rss_mb() const;   // VmHWM from /proc; 0 once exited
    double rss_shmem_mb() const;  // RssShmem now (mapped shared-memory pages); 0 once exited

  private:
    pid_t pid_ = -1;
    int code_ = -1;
};

}  // namespace psrun::launcher::ps_tools
