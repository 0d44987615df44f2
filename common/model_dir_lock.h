// One run per model dir (docs/reliability.md "One run per model dir").
//
// Every process of a run that uses a model dir (psrun local, each psd, each workerd) holds a
// ModelDirLock for its lifetime. The files, all under <model-dir>/.psrun/:
//   run.lock                 {"run_id", "since", "by"}: the run that holds the dir. Created with
//                            link(2) of a fully written file (atomic, EEXIST when present).
//   members/<host>.<pid>     one per live process of that run: {"run_id", "host", "pid",
//                            "boot_id", "start_ticks", "role", "since"}; its mtime is refreshed
//                            every `refresh` by a thread of the process (the lease).
// A process whose run id equals the lock's joins. Another run is refused (kRejected, the message
// names the holder's processes and what to do) unless the holder is provably gone: none of its
// member files belongs to a live process. A member on this host is live while its pid runs with
// the recorded start time and boot id; a member on another host while its file's mtime is less
// than `lease` old, measured against the mtime the file system just gave our own member file
// (server time on NFS: no clock skew). A gone holder's lock is taken over (rename, re-check,
// link), so a requeued job (same run id) or a run after a crash starts without manual cleanup.
// Reading these files never throws: a file that is not JSON, or whose run_id is not a string, names
// no run (a lock like that is stale and taken over; a member like that counts for no run), with a
// warning; a mistyped other field reads as absent.
//
// Relies on: link/rename atomic on the model dir's file system and utimensat(UTIME_NOW) setting
// server time, as on local file systems, NFSv3/v4, Lustre and GPFS. Not on flock/fcntl locks.
// Thread-safe: the refresher thread (all signals blocked) and the owner share only atomics and the
// member file.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/result.h"

namespace psrun {

struct RunIdentity {
    std::string run_id;  // equal for every process of one run ("slurm-123", "local-host-4711", ...)
    std::string role;    // this process, for messages: "psd 0", "worker 0 (chief)", "psrun local"
};

struct ModelDirLockOptions {
    std::chrono::milliseconds lease{120000};   // a member on another host silent this long is gone
    std::chrono::milliseconds refresh{10000};  // how often a member touches its file
};

// What a model dir's lock says of one run, read without taking the lock (ModelDirLock::status).
struct RunStatus {
    bool holds = false;       // run.lock names the run
    bool live = false;        // ... and one of its member processes is live (as acquire() judges)
    std::string description;  // for messages: the holder and its processes, or why it is not the run
};

class ModelDirLock {
  public:
    // Whether run `run_id` holds `model_dir` with a live process, for one that acts for a run it is
    // not a member of yet (psrun join, whose join file may have outlived its job). Writes only a
    // probe file in <model-dir>/.psrun for the file system's clock (removed); never throws.
    static RunStatus status(const std::string& model_dir, const std::string& run_id, ModelDirLockOptions options = {});

    // Joins the run holding `model_dir` (creating the dir and the lock when free or when its
    // holder is gone). kRejected: another live run holds it (message names it and the fix);
    // kIo: the dir cannot be written.
    [[nodiscard]] static Result<std::unique_ptr<ModelDirLock>> acquire(const std::string& model_dir,
                                                                       const RunIdentity& me,
                                                                       ModelDirLockOptions options = {});
    // Stops the refresher, removes this member's file and, when no other live member of the
    // run is left, the lock itself.
    ~ModelDirLock();
    ModelDirLock(const ModelDirLock&) = delete;
    ModelDirLock& operator=(const ModelDirLock&) = delete;

    // True once the refresher found the lock held by another run (ours had lapsed, e.g. after
    // the job was suspended longer than the lease): this run must not write the dir any more.
    bool lost() const { return lost_.load(); }
    const std::string& member_path() const { return member_path_; }

  private:
    ModelDirLock(std::string dir, RunIdentity me, ModelDirLockOptions options);
    void refresh_loop();
    void refresh_once();

    std::string dir_;  // <model-dir>/.psrun
    RunIdentity me_;
    ModelDirLockOptions options_;
    std::string member_path_;
    std::atomic<bool> lost_{false};
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;  // guarded by mutex_
    std::thread refresher_;
};

// The run id of a distributed job whose launcher gave none: derived from the psd endpoints,
// which every psd and worker of one job share ("ps-<16 hex digits>").
std::string run_id_from_endpoints(const std::string& ps_list);
// This host's name (gethostname), "localhost" if that fails.
std::string this_host();

}  // namespace psrun
