#include "common/model_dir_lock.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <vector>

#include "common/fnv1a.h"
#include "common/text_file.h"
#include "common/utf8.h"

namespace psrun {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string boot_id() {
    std::string id = read_text_file("/proc/sys/kernel/random/boot_id");
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    return id;
}

// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot), or 0 when the process is
// gone or a zombie (state Z or X: it exited and only waits to be reaped).
std::uint64_t start_ticks(long pid) {
    const std::string stat = read_text_file("/proc/" + std::to_string(pid) + "/stat");
    const auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos) return 0;
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; ++i) {
        if (i == 3 && (field == "Z" || field == "X")) return 0;
        if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
    }
    return 0;
}

std::string utc_now() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return buf;
}

// Writes `text` to a fresh unique file next to `path` and returns its name.
Result<std::string> write_temp(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp." + this_host() + "." + std::to_string(::getpid());
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) return make_error(ErrorCode::kIo, tmp + ": cannot write: " + std::strerror(errno));
    return tmp;
}

Result<void> write_replace(const std::string& path, const std::string& text) {
    PSRUN_TRY_ASSIGN(auto tmp, write_temp(path, text));
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int e = errno;
        ::unlink(tmp.c_str());
        return make_error(ErrorCode::kIo, path + ": cannot write: " + std::strerror(e));
    }
    return {};
}

// Creates `path` holding `text` unless it exists: true when created.
Result<bool> create_exclusive(const std::string& path, const std::string& text) {
    PSRUN_TRY_ASSIGN(auto tmp, write_temp(path, text));
    const int rc = ::link(tmp.c_str(), path.c_str());
    const int e = errno;
    struct stat st {};
    // NFS: a lost reply to a link that succeeded reports an error; the link count tells.
    const bool linked = rc == 0 || (::stat(tmp.c_str(), &st) == 0 && st.st_nlink == 2);
    ::unlink(tmp.c_str());
    if (linked) return true;
    if (e == EEXIST) return false;
    return make_error(ErrorCode::kIo, path + ": cannot create: " + std::strerror(e));
}

// Fields of a lock or member file, read totally: anyone can write anything into the shared dir,
// and json::value() throws type_error on a field of another type (std::terminate on the
// refresher thread or in the destructor). A missing or mistyped field reads as `fallback`.
std::string text_field(const json& j, const char* key, const std::string& fallback = "") {
    if (!j.is_object()) return fallback;
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

template <class T>
T number_field(const json& j, const char* key) {
    if (!j.is_object()) return T{};
    const auto it = j.find(key);
    return it != j.end() && it->is_number_integer() ? it->get<T>() : T{};
}

// The run id a lock or member file names; nullopt (never equal to a run's id: the file is foreign
// or stale) when it is unreadable or its run_id is not a non-empty string, with a warning for a
// JSON object whose run_id has another type.
std::optional<std::string> run_id_of(const json& j, const std::string& path) {
    if (!j.is_object()) return std::nullopt;
    const auto it = j.find("run_id");
    if (it != j.end() && it->is_string() && !it->get<std::string>().empty()) return it->get<std::string>();
    spdlog::warn("model dir lock: {} has no run_id string (holds {}): treated as stale", path,
                 it == j.end() ? std::string("none") : it->dump());
    return std::nullopt;
}

struct Member {
    std::string path;
    json info;
    double age_seconds = 0;  // file-system time since its last refresh
    bool live = false;
};

std::vector<Member> read_members(const std::string& members_dir, const std::string& run_id, double fs_now,
                                 std::chrono::milliseconds lease) {
    std::vector<Member> out;
    std::error_code ec;
    const std::string host = this_host();
    const std::string boot = boot_id();
    for (const auto& entry : fs::directory_iterator(members_dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.find(".tmp.") != std::string::npos) continue;
        Member m;
        m.path = entry.path().string();
        m.info = json::parse(read_text_file(m.path), nullptr, false);
        if (run_id_of(m.info, m.path) != run_id) continue;
        struct stat st {};
        if (::stat(m.path.c_str(), &st) != 0) continue;
        m.age_seconds = fs_now - (static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9);
        if (text_field(m.info, "host") == host) {
            const long pid = number_field<long>(m.info, "pid");
            const std::uint64_t started = pid > 0 ? start_ticks(pid) : 0;
            m.live = text_field(m.info, "boot_id") == boot && started != 0 &&
                     started == number_field<std::uint64_t>(m.info, "start_ticks");
        } else {
            m.live = m.age_seconds * 1000 < static_cast<double>(lease.count());
        }
        out.push_back(std::move(m));
    }
    return out;
}

double mtime_of(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return 0;
    return static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9;
}

std::string describe_holder(const json& lock, const std::vector<Member>& live) {
    std::string s = "run " + text_field(lock, "run_id", "?") + " (since " + text_field(lock, "since", "?") + ")";
    for (std::size_t i = 0; i < live.size(); ++i) {
        const auto& m = live[i].info;
        s += (i == 0 ? ": " : ", ") + text_field(m, "role", "?") + " pid " +
             std::to_string(number_field<long>(m, "pid")) + " on host " + text_field(m, "host", "?") +
             fmt::format(" (heard {:.0f} s ago)", std::max(0.0, live[i].age_seconds));
    }
    return s;
}

}  // namespace

std::string this_host() {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "localhost";
    return host;
}

std::string run_id_from_endpoints(const std::string& ps_list) {
    return fmt::format("ps-{:016x}", Fnv1a(Fnv1a::kLegacyOffset).add(ps_list).value());
}

RunStatus ModelDirLock::status(const std::string& model_dir, const std::string& run_id, ModelDirLockOptions options) {
    RunStatus s;
    std::error_code ec;
    const std::string dir = fs::absolute(model_dir, ec).lexically_normal().string() + "/.psrun";
    const std::string lock_path = dir + "/run.lock";
    const std::string text = read_text_file(lock_path);
    if (text.empty() && mtime_of(lock_path) == 0) {
        s.description = "no run holds the model dir (no " + lock_path + ")";
        return s;
    }
    const json held = json::parse(text, nullptr, false);
    const auto held_run = run_id_of(held, lock_path);
    if (held_run != run_id) {
        s.description = held_run ? "the model dir is held by another run, " + *held_run : lock_path + " names no run";
        return s;
    }
    s.holds = true;
    // The file system's clock (server time on NFS), as acquire() reads it from its member file.
    const std::string probe = dir + "/status.tmp." + this_host() + "." + std::to_string(::getpid());
    double fs_now = 0;
    if (const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644); fd >= 0) {
        ::close(fd);
        fs_now = mtime_of(probe);
        ::unlink(probe.c_str());
    }
    if (fs_now == 0)
        fs_now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const auto members = read_members(dir + "/members", run_id, fs_now, options.lease);
    std::vector<Member> live;
    for (const auto& m : members)
        if (m.live) live.push_back(m);
    s.live = !live.empty();
    s.description = describe_holder(held, s.live ? live : members);
    return s;
}

ModelDirLock::ModelDirLock(std::string dir, RunIdentity me, ModelDirLockOptions options)
    : dir_(std::move(dir)), me_(std::move(me)), options_(options) {
    member_path_ = dir_ + "/members/" + this_host() + "." + std::to_string(::getpid());
}

Result<std::unique_ptr<ModelDirLock>> ModelDirLock::acquire(const std::string& model_dir, const RunIdentity& me,
                                                            ModelDirLockOptions options) {
    if (me.run_id.empty()) return make_error(ErrorCode::kInvalidArgument, "empty run id");
    std::error_code ec;
    const std::string dir = fs::absolute(model_dir, ec).lexically_normal().string() + "/.psrun";
    fs::create_directories(dir + "/members", ec);
    if (ec)
        return make_error(ErrorCode::kIo, "model dir " + model_dir + ": cannot create " + dir + ": " + ec.message());
    std::unique_ptr<ModelDirLock> lock(new ModelDirLock(dir, me, options));
    // Our member file first: from the moment the lock names our run, the run has a live member.
    const json info = {{"run_id", me.run_id},
                       {"host", this_host()},
                       {"pid", static_cast<long>(::getpid())},
                       {"boot_id", boot_id()},
                       {"start_ticks", start_ticks(::getpid())},
                       {"role", me.role},
                       {"since", utc_now()}};
    PSRUN_TRY(write_replace(lock->member_path_, json_text(info) + "\n"));
    const std::string lock_path = dir + "/run.lock";
    const json mine = {{"run_id", me.run_id}, {"since", utc_now()}, {"by", me.role}};
    auto give_up = [&](Error e) {
        ::unlink(lock->member_path_.c_str());
        return tl::unexpected(std::move(e));
    };
    for (int attempt = 0; attempt < 20; ++attempt) {
        auto created = create_exclusive(lock_path, json_text(mine) + "\n");
        if (!created) return give_up(created.error());
        if (*created) {
            spdlog::info("model dir {}: held by run {} from now on ({})", model_dir, me.run_id, me.role);
            break;
        }
        const std::string text = read_text_file(lock_path);
        const json held = json::parse(text, nullptr, false);
        const auto held_run = run_id_of(held, lock_path);
        if (held_run == me.run_id) {
            spdlog::info("model dir {}: joined run {} as {}", model_dir, me.run_id, me.role);
            break;
        }
        if (text.empty() && mtime_of(lock_path) == 0) continue;  // vanished: retry
        // A lock naming no run has no members: it is taken over.
        const auto members =
            held_run ? read_members(dir + "/members", *held_run, mtime_of(lock->member_path_), options.lease)
                     : std::vector<Member>{};
        std::vector<Member> live;
        for (const auto& m : members)
            if (m.live) live.push_back(m);
        if (!live.empty())
            return give_up(
                Error{ErrorCode::kRejected,
                      "model dir " + model_dir + " is in use by another " + describe_holder(held, live) +
                          ". Two runs must not share a model dir: give this run another --model-dir, or stop that run "
                          "first (a run whose processes are gone is taken over at once on the same host, and after " +
                          fmt::format("{:.0f}", options.lease.count() / 1000.0) +
                          " s without a heartbeat from another host)"});
        // The holder is gone: move its lock aside, check that it is still the one we judged, take over.
        const std::string aside = lock_path + ".gone." + this_host() + "." + std::to_string(::getpid());
        if (::rename(lock_path.c_str(), aside.c_str()) != 0) continue;  // someone else moved it
        if (read_text_file(aside) != text) {  // a new holder appeared in between: put its lock back
            if (::link(aside.c_str(), lock_path.c_str()) != 0) spdlog::warn("{}: could not restore", lock_path);
            ::unlink(aside.c_str());
            continue;
        }
        ::unlink(aside.c_str());
        for (const auto& m : members) ::unlink(m.path.c_str());
        spdlog::warn("model dir {}: taking over from {}, whose processes are all gone", model_dir,
                     held_run ? *held_run : std::string("an unreadable lock"));
        if (attempt == 19) return give_up(Error{ErrorCode::kIo, lock_path + ": lock keeps changing; try again"});
    }
    // Leftovers of our own run's dead processes (a requeued job, a restarted daemon).
    for (const auto& m : read_members(dir + "/members", me.run_id, mtime_of(lock->member_path_), options.lease))
        if (!m.live && m.path != lock->member_path_) ::unlink(m.path.c_str());
    // The refresher takes no signals: a process that reads SIGCHLD or SIGTERM through a signalfd
    // (psrun local's supervisor, psd) blocks them only in its own threads, and a thread with them
    // unblocked would swallow them.
    sigset_t all, old;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, &old);
    lock->refresher_ = std::thread([l = lock.get()] { l->refresh_loop(); });
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return lock;
}

ModelDirLock::~ModelDirLock() {
    {
        std::lock_guard<std::mutex> g(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (refresher_.joinable()) refresher_.join();
    ::unlink(member_path_.c_str());
    try {  // a destructor must not throw (a directory that vanished under us, say): the lock is left
        bool others = false;
        for (const auto& m : read_members(dir_ + "/members", me_.run_id, mtime_of(dir_), options_.lease))
            others = others || (m.live && m.path != member_path_);
        const std::string lock_path = dir_ + "/run.lock";
        const json held = json::parse(read_text_file(lock_path), nullptr, false);
        if (!others && run_id_of(held, lock_path) == me_.run_id) ::unlink(lock_path.c_str());
    } catch (const std::exception& e) {
        spdlog::warn("model dir lock: cannot release {}: {}", dir_, e.what());
    }
}

void ModelDirLock::refresh_loop() {
    std::unique_lock<std::mutex> g(mutex_);
    while (!wake_.wait_for(g, options_.refresh, [this] { return stopping_; })) {
        g.unlock();
        try {  // nothing may leave this thread (std::terminate): the next round tries again
            refresh_once();
        } catch (const std::exception& e) {
            spdlog::warn("model dir lock: refreshing {} failed: {}", member_path_, e.what());
        }
        g.lock();
    }
}

void ModelDirLock::refresh_once() {
    if (::utimensat(AT_FDCWD, member_path_.c_str(), nullptr, 0) != 0 && errno == ENOENT)
        spdlog::warn("model dir lock: {} disappeared; this process no longer counts as a live member", member_path_);
    const std::string lock_path = dir_ + "/run.lock";
    const json held = json::parse(read_text_file(lock_path), nullptr, false);
    if (!held.is_object() || lost_.load()) return;  // unreadable (being replaced?): judged next round
    const auto held_run = run_id_of(held, lock_path);
    if (held_run != me_.run_id && !lost_.exchange(true))
        spdlog::error(
            "model dir {} was taken over by run {} (this run {} was silent longer than the {:.0f} s lease): "
            "this run must not write it any more",
            fs::path(dir_).parent_path().string(), held_run.value_or("?"), me_.run_id, options_.lease.count() / 1000.0);
}

}  // namespace psrun
