#include "launcher/ps_processes.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

#include "common/signals.h"

namespace psrun::launcher::ps_tools {

Result<std::string> find_psd_binary(const std::string& bin_dir) {
    namespace fs = std::filesystem;
    std::vector<fs::path> candidates;
    if (!bin_dir.empty()) candidates.push_back(fs::path(bin_dir) / "psd");
    else if (const char* env = std::getenv("PSRUN_BIN_DIR")) candidates.push_back(fs::path(env) / "psd");
    else {
        std::error_code ec;
        const fs::path self = fs::read_symlink("/proc/self/exe", ec).parent_path();
        candidates.push_back(self / ".." / "psd" / "psd");
        candidates.push_back(self / "psd");
    }
    for (const auto& c : candidates)
        if (::access(c.c_str(), X_OK) == 0) return fs::weakly_canonical(c).string();
    return make_error(ErrorCode::kNotFound, "psd binary not found at " + candidates.front().string() +
                                                ": build it, or point --bin-dir / PSRUN_BIN_DIR at its directory");
}

Result<int> free_tcp_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return make_error(ErrorCode::kIo, std::string("socket: ") + std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        ::close(fd);
        return make_error(ErrorCode::kIo, std::string("bind 127.0.0.1:0: ") + std::strerror(errno));
    }
    ::close(fd);
    return ntohs(addr.sin_port);
}

TempDir::TempDir(const std::string& prefix) {
    const auto parent = std::filesystem::temp_directory_path();
    std::string tmpl = (parent / (prefix + ".XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr)
        throw std::runtime_error("cannot create a private temporary directory in " + parent.string() + ": " +
                                 std::strerror(errno) + " (set TMPDIR to a writable directory)");
    path_ = tmpl;
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

PsdProcess::PsdProcess(const std::string& exe, const std::vector<std::string>& args) {
    std::vector<std::string> argv_store = {exe};
    argv_store.insert(argv_store.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_store) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed: " + std::string(std::strerror(errno)));
    if (pid_ == 0) {
        unblock_all_signals();
        ::execv(exe.c_str(), argv.data());
        ::_exit(127);
    }
}

PsdProcess::PsdProcess(PsdProcess&& other) noexcept : pid_(std::exchange(other.pid_, -1)), code_(other.code_) {}

PsdProcess::~PsdProcess() {
    if (pid_ <= 0 || code_ >= 0) return;
    ::kill(pid_, SIGTERM);
    if (wait(5) < 0) {
        ::kill(pid_, SIGKILL);
        wait(5);
    }
}

int PsdProcess::wait(double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (code_ < 0) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            break;
        }
        if (std::chrono::steady_clock::now() >= deadline) return -1;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return code_;
}

namespace {
double status_mb(pid_t pid, const std::string& field) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string key;
    while (in >> key) {
        if (key == field) {
            double kb = 0;
            in >> kb;
            return kb / 1024.0;
        }
        std::getline(in, key);
    }
    return 0;
}
}  // namespace

double PsdProcess::peak_rss_mb() const { return status_mb(pid_, "VmHWM:"); }
double PsdProcess::rss_shmem_mb() const { return status_mb(pid_, "RssShmem:"); }

}  // namespace psrun::launcher::ps_tools
