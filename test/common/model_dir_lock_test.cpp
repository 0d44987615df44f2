// One run per model dir (common/model_dir_lock.h): join, refusal naming the holder, takeover from
// dead processes on this host and from silent ones on another, release by the last member.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/model_dir_lock.h"

using namespace psrun;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    std::string path;
    TempDir() {
        std::string tmpl = (fs::temp_directory_path() / "psrun-lock-XXXXXX").string();
        path = ::mkdtemp(tmpl.data());
    }
    ~TempDir() { fs::remove_all(path); }
};

nlohmann::json read_json(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in, nullptr, false);
}

// Sets a file's mtime `seconds` into the past (a member on another host that stopped refreshing).
void age(const std::string& path, double seconds) {
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    timespec times[2] = {st.st_atim, st.st_mtim};
    times[1].tv_sec -= static_cast<time_t>(seconds);
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

// A member file as another host's process of `run_id` would have written it.
void write_remote_member(const std::string& model_dir, const std::string& run_id) {
    fs::create_directories(model_dir + "/.psrun/members");
    std::ofstream(model_dir + "/.psrun/members/othernode.4242")
        << nlohmann::json{{"run_id", run_id}, {"host", "othernode"}, {"pid", 4242},       {"role", "psd 1"},
                          {"boot_id", "x"},   {"start_ticks", 1},    {"since", "earlier"}}
               .dump();
    std::ofstream(model_dir + "/.psrun/run.lock")
        << nlohmann::json{{"run_id", run_id}, {"since", "earlier"}, {"by", "psd 1"}}.dump();
}

}  // namespace

TEST_CASE("the first run holds the dir, its other processes join, the last one out releases it", "[lock]") {
    TempDir d;
    auto a = ModelDirLock::acquire(d.path + "/model", {"run-a", "psd 0"});
    REQUIRE(a);
    const auto lock_file = d.path + "/model/.psrun/run.lock";
    CHECK(read_json(lock_file)["run_id"] == "run-a");
    CHECK(fs::exists((*a)->member_path()));
    // Another process of the same run (the chief) joins, then ends first: the lock stays ours.
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        auto chief = ModelDirLock::acquire(d.path + "/model", {"run-a", "worker 0 (chief)"});
        ::_exit(chief ? 0 : 3);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(read_json(lock_file)["run_id"] == "run-a");
    CHECK(fs::exists((*a)->member_path()));
    a->reset();  // the last member leaves: released
    CHECK_FALSE(fs::exists(lock_file));
    auto b = ModelDirLock::acquire(d.path + "/model", {"run-b", "psrun local"});
    REQUIRE(b);  // the next run takes it without a word
    CHECK(read_json(lock_file)["run_id"] == "run-b");
}

TEST_CASE("another run is refused while a process of the holder lives, naming it", "[lock]") {
    TempDir d;
    // The holder is a child process: a live pid on this host other than ours.
    int ready[2], go[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(go) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        auto held = ModelDirLock::acquire(d.path, {"run-a", "psd 0"});
        char c = held ? 'y' : 'n';
        (void)!::write(ready[1], &c, 1);
        (void)!::read(go[0], &c, 1);  // hold until the parent says so
        held->reset();
        ::_exit(0);
    }
    char c = 0;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    REQUIRE(c == 'y');
    auto refused = ModelDirLock::acquire(d.path, {"run-b", "psrun local"});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::kRejected);
    const std::string& m = refused.error().message;
    CHECK_THAT(m, Catch::Contains("in use by another run run-a"));
    CHECK_THAT(m, Catch::Contains("psd 0 pid " + std::to_string(child) + " on host " + this_host()));
    CHECK_THAT(m, Catch::Contains("another --model-dir"));
    // The refused run left nothing behind: only the holder's member file is there.
    std::size_t members = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(d.path + "/.psrun/members")) ++members;
    CHECK(members == 1);
    CHECK(read_json(d.path + "/.psrun/run.lock")["run_id"] == "run-a");

    SECTION("a holder killed with SIGKILL is gone: the next run takes over at once") {
        REQUIRE(::kill(child, SIGKILL) == 0);
        REQUIRE(::waitpid(child, nullptr, 0) == child);
        auto b = ModelDirLock::acquire(d.path, {"run-b", "psrun local"});
        REQUIRE(b);
        CHECK(read_json(d.path + "/.psrun/run.lock")["run_id"] == "run-b");
    }
    SECTION("a holder that ends normally releases the dir") {
        REQUIRE(::write(go[1], "x", 1) == 1);
        int status = 0;
        REQUIRE(::waitpid(child, &status, 0) == child);
        CHECK(WEXITSTATUS(status) == 0);
        CHECK_FALSE(fs::exists(d.path + "/.psrun/run.lock"));
        CHECK(ModelDirLock::acquire(d.path, {"run-b", "psrun local"}));
    }
    for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
}

TEST_CASE("a holder on another host is live while it refreshes within the lease", "[lock]") {
    TempDir d;
    write_remote_member(d.path, "slurm-17");
    ModelDirLockOptions o;
    o.lease = std::chrono::milliseconds(60000);
    auto refused = ModelDirLock::acquire(d.path, {"slurm-18", "worker 0 (chief)"}, o);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message, Catch::Contains("run slurm-17"));
    CHECK_THAT(refused.error().message, Catch::Contains("psd 1 pid 4242 on host othernode"));
    CHECK_THAT(refused.error().message, Catch::Contains("after 60 s without a heartbeat"));

    SECTION("silent longer than the lease: gone, taken over") {
        age(d.path + "/.psrun/members/othernode.4242", 61);
        auto b = ModelDirLock::acquire(d.path, {"slurm-18", "worker 0 (chief)"}, o);
        REQUIRE(b);
        CHECK(read_json(d.path + "/.psrun/run.lock")["run_id"] == "slurm-18");
        CHECK_FALSE(fs::exists(d.path + "/.psrun/members/othernode.4242"));
    }
    SECTION("the same job requeued (same run id) joins at once, live members or not") {
        auto requeued = ModelDirLock::acquire(d.path, {"slurm-17", "psd 0"}, o);
        REQUIRE(requeued);
        CHECK(read_json(d.path + "/.psrun/run.lock")["run_id"] == "slurm-17");
    }
}

TEST_CASE("the refresher keeps the lease and notices a takeover", "[lock]") {
    TempDir d;
    ModelDirLockOptions o;
    o.refresh = std::chrono::milliseconds(50);
    auto a = ModelDirLock::acquire(d.path, {"run-a", "psd 0"}, o);
    REQUIRE(a);
    age((*a)->member_path(), 100);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    struct stat st {};
    REQUIRE(::stat((*a)->member_path().c_str(), &st) == 0);
    CHECK(std::chrono::system_clock::now().time_since_epoch() - std::chrono::seconds(st.st_mtim.tv_sec) <
          std::chrono::seconds(5));
    CHECK_FALSE((*a)->lost());
    std::ofstream(d.path + "/.psrun/run.lock") << nlohmann::json{{"run_id", "run-b"}}.dump();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK((*a)->lost());
    a->reset();
    CHECK(read_json(d.path + "/.psrun/run.lock")["run_id"] == "run-b");  // not ours: left alone
}

// Issue 39: json::value("run_id", "") threw type_error on these, on the refresher thread
// (std::terminate), in the destructor and in acquire().
TEST_CASE("lock and member files whose fields have other types are stale, never a throw", "[lock]") {
    TempDir d;
    fs::create_directories(d.path + "/.psrun/members");
    std::ofstream(d.path + "/.psrun/run.lock") << R"({"run_id": 5, "since": 7})";
    std::ofstream(d.path + "/.psrun/members/othernode.1") << R"({"run_id": 5, "host": 3, "pid": "x"})";
    std::ofstream(d.path + "/.psrun/members/othernode.2") << R"({"run_id": "run-a", "host": [], "pid": "x",
                                                                 "start_ticks": "y", "role": 1})";
    age(d.path + "/.psrun/members/othernode.2", 1000);  // run-a's: silent past the lease, so not live
    ModelDirLockOptions o;
    o.refresh = std::chrono::milliseconds(20);
    std::unique_ptr<ModelDirLock> a;
    REQUIRE_NOTHROW([&] {
        auto lock = ModelDirLock::acquire(d.path, {"run-a", "psd 0"}, o);  // the lock names no run: taken over
        REQUIRE(lock);
        a = std::move(*lock);
    }());
    CHECK(read_json(d.path + "/.psrun/run.lock")["run_id"] == "run-a");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK_FALSE(a->lost());

    // The refresher reads a lock whose run_id is a number: foreign, so this run lost the dir.
    std::ofstream(d.path + "/.psrun/run.lock") << R"({"run_id": 5})";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK(a->lost());
    CHECK_NOTHROW(a.reset());  // the destructor reads it too, and leaves it
    CHECK(read_json(d.path + "/.psrun/run.lock")["run_id"] == 5);

    // Another run meets the same lock with a member file of other types: it takes over as well.
    auto b = ModelDirLock::acquire(d.path, {"run-b", "psd 0"}, o);
    REQUIRE(b);
    CHECK(read_json(d.path + "/.psrun/run.lock")["run_id"] == "run-b");
}

TEST_CASE("an unwritable model dir is an I/O error naming it", "[lock]") {
    TempDir d;
    std::ofstream(d.path + "/file") << "x";
    auto r = ModelDirLock::acquire(d.path + "/file/model", {"run-a", "psd 0"});
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kIo);
    CHECK_THAT(r.error().message, Catch::Contains(d.path + "/file/model"));
}

TEST_CASE("run ids derived from the psd endpoints agree for every task of a job", "[lock]") {
    const auto a = run_id_from_endpoints("tcp://n1:2222,tcp://n2:2222");
    CHECK(a == run_id_from_endpoints("tcp://n1:2222,tcp://n2:2222"));
    CHECK(a != run_id_from_endpoints("tcp://n1:2223,tcp://n2:2222"));
    CHECK(a.rfind("ps-", 0) == 0);
    CHECK(a.size() == 19);
}

TEST_CASE("the refresher thread takes no signal that the owner reads through a signalfd", "[lock]") {
    // psrun local acquires the lock first and blocks SIGCHLD for its signalfd later: a refresher
    // that accepted SIGCHLD would swallow every child's exit (the supervisor then waits forever).
    TempDir d;
    auto a = ModelDirLock::acquire(d.path, {"run-a", "psrun local"});
    REQUIRE(a);
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    REQUIRE(::pthread_sigmask(SIG_BLOCK, &chld, &old) == 0);
    const int sfd = ::signalfd(-1, &chld, SFD_CLOEXEC);
    REQUIRE(sfd >= 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) ::_exit(0);
    pollfd p{sfd, POLLIN, 0};
    CHECK(::poll(&p, 1, 5000) == 1);
    REQUIRE(::waitpid(child, nullptr, 0) == child);
    ::close(sfd);
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

TEST_CASE("status tells whether a run still holds the dir with a live process, without taking it", "[lock]") {
    TempDir d;
    ModelDirLockOptions o;
    o.lease = std::chrono::milliseconds(60000);
    SECTION("no lock: no run holds it") {
        const RunStatus s = ModelDirLock::status(d.path, "slurm-17", o);
        CHECK_FALSE(s.holds);
        CHECK_FALSE(s.live);
        CHECK_THAT(s.description, Catch::Contains("no run holds the model dir"));
        CHECK_FALSE(fs::exists(d.path + "/.psrun/run.lock"));  // nothing taken
    }
    SECTION("a member on another host: live within the lease, gone after it") {
        write_remote_member(d.path, "slurm-17");
        RunStatus s = ModelDirLock::status(d.path, "slurm-17", o);
        CHECK(s.holds);
        CHECK(s.live);
        CHECK_THAT(s.description, Catch::Contains("psd 1 pid 4242 on host othernode"));
        age(d.path + "/.psrun/members/othernode.4242", 61);
        s = ModelDirLock::status(d.path, "slurm-17", o);
        CHECK(s.holds);
        CHECK_FALSE(s.live);
        CHECK_THAT(s.description, Catch::Contains("heard 6"));                  // 61 s or a little more
        CHECK(read_json(d.path + "/.psrun/run.lock")["run_id"] == "slurm-17");  // not taken over
        const RunStatus other = ModelDirLock::status(d.path, "slurm-18", o);
        CHECK_FALSE(other.holds);
        CHECK_FALSE(other.live);
        CHECK_THAT(other.description, Catch::Contains("held by another run, slurm-17"));
        for (const auto& e : fs::directory_iterator(d.path + "/.psrun"))  // the clock's probe file is gone
            CHECK(e.path().filename().string().find("status.tmp") == std::string::npos);
    }
    SECTION("a member on this host: live while its process runs, gone once it is killed") {
        int ready[2];
        REQUIRE(::pipe(ready) == 0);
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            auto mine = ModelDirLock::acquire(d.path, {"local-a", "psd 0"}, o);
            const char c = mine ? 'y' : 'n';
            if (::write(ready[1], &c, 1) != 1) ::_exit(1);
            ::pause();  // until SIGKILL: no destructor, the member and lock files stay
            ::_exit(0);
        }
        ::close(ready[1]);
        char c = 0;
        REQUIRE(::read(ready[0], &c, 1) == 1);
        ::close(ready[0]);
        REQUIRE(c == 'y');
        RunStatus s = ModelDirLock::status(d.path, "local-a", o);
        CHECK(s.holds);
        CHECK(s.live);
        ::kill(child, SIGKILL);
        int st = 0;
        REQUIRE(::waitpid(child, &st, 0) == child);
        s = ModelDirLock::status(d.path, "local-a", o);
        CHECK(s.holds);
        CHECK_FALSE(s.live);
        CHECK_THAT(s.description, Catch::Contains("psd 0 pid " + std::to_string(child)));
    }
}
