#include "common/job_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <sstream>
#include <thread>

namespace psrun {
namespace {

tl::unexpected<Error> io_error(const std::string& what) {
    return make_error(ErrorCode::kIo, what + ": " + std::strerror(errno));
}

bool valid_z85_key(const std::string& key) {
    // zmq_z85_decode stops at a NUL: a key with one inside would decode short and pass.
    if (key.size() != 40 || key.find('\0') != std::string::npos) return false;
    std::uint8_t bin[32];
    return zmq_z85_decode(bin, key.c_str()) != nullptr;
}

std::string format_keys(const JobKeys& k) {
    char token[17];
    std::snprintf(token, sizeof token, "%016llx", static_cast<unsigned long long>(k.token));
    std::ostringstream out;
    out << "# psrun job key file: private to this job's user (mode 0600). Do not share.\n"
        << "format=1\n"
        << "token=" << token << "\n"
        << "server_public=" << k.server_public << "\n"
        << "server_secret=" << k.server_secret << "\n"
        << "client_public=" << k.client_public << "\n"
        << "client_secret=" << k.client_secret << "\n";
    return out.str();
}

}  // namespace

Result<JobKeys> generate_job_keys() {
    if (!zmq_has("curve")) return make_error(ErrorCode::kUnsupported, "libzmq was built without CURVE: use --no-auth");
    JobKeys k;
    char pub[41], sec[41];
    if (zmq_curve_keypair(pub, sec) != 0) return io_error("zmq_curve_keypair");
    k.server_public = pub;
    k.server_secret = sec;
    if (zmq_curve_keypair(pub, sec) != 0) return io_error("zmq_curve_keypair");
    k.client_public = pub;
    k.client_secret = sec;
    std::random_device rd;
    do {
        k.token = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    } while (k.token == 0);
    return k;
}

Result<void> write_job_key_file(const std::string& path, const JobKeys& keys) {
    const std::filesystem::path target(path);
    std::error_code ec;
    if (target.has_parent_path() && !std::filesystem::exists(target.parent_path(), ec)) {
        std::filesystem::create_directories(target.parent_path(), ec);
        if (ec)
            return make_error(ErrorCode::kIo, "cannot create " + target.parent_path().string() + ": " + ec.message());
        ::chmod(target.parent_path().c_str(), 0700);
    }
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return io_error("cannot create " + tmp);
    const std::string text = format_keys(keys);
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                         ::fchmod(fd, 0600) == 0 && ::fsync(fd) == 0;
    const int saved = errno;
    ::close(fd);
    if (!written) {
        ::unlink(tmp.c_str());
        errno = saved;
        return io_error("cannot write " + tmp);
    }
    const int rc = ::link(tmp.c_str(), path.c_str());
    const int link_errno = errno;
    ::unlink(tmp.c_str());
    if (rc != 0) {
        errno = link_errno;
        return io_error("cannot create key file " + path);
    }
    return {};
}

Result<JobKeys> read_job_key_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT) return make_error(ErrorCode::kNotFound, "key file " + path + " does not exist");
        return io_error("cannot stat key file " + path);
    }
    if (!S_ISREG(st.st_mode)) return make_error(ErrorCode::kInvalidArgument, path + " is not a regular file");
    if (st.st_uid != ::geteuid())
        return make_error(ErrorCode::kUnauthorized, "key file " + path + " is owned by another user");
    if ((st.st_mode & 077) != 0)
        return make_error(ErrorCode::kUnauthorized, "key file " + path + " is readable by others: run chmod 600 on it");
    std::ifstream in(path, std::ios::binary);
    if (!in) return io_error("cannot read key file " + path);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    return parse_job_keys(text, "key file " + path);
}

Result<JobKeys> parse_job_keys(std::string_view text, const std::string& path) {
    std::map<std::string, std::string, std::less<>> fields;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        const std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        if (line.empty() || line[0] == '#') continue;
        const auto eq = line.find('=');
        if (eq == std::string_view::npos) return make_error(ErrorCode::kInvalidArgument, path + ": line without '='");
        fields[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    }
    if (fields["format"] != "1")
        return make_error(ErrorCode::kInvalidArgument, path + ": unknown format (want format=1)");
    JobKeys k;
    const std::string& token = fields["token"];
    // strtoull alone would also take a sign, "0x" or leading blanks: insist on 16 hex digits.
    const bool hex = token.size() == 16 && std::all_of(token.begin(), token.end(), [](char c) {
                         return std::isxdigit(static_cast<unsigned char>(c)) != 0;
                     });
    k.token = hex ? std::strtoull(token.c_str(), nullptr, 16) : 0;
    if (k.token == 0) return make_error(ErrorCode::kInvalidArgument, path + ": bad token");
    k.server_public = fields["server_public"];
    k.server_secret = fields["server_secret"];
    k.client_public = fields["client_public"];
    k.client_secret = fields["client_secret"];
    for (const auto* key : {&k.server_public, &k.server_secret, &k.client_public, &k.client_secret})
        if (!valid_z85_key(*key)) return make_error(ErrorCode::kInvalidArgument, path + ": malformed CURVE key");
    return k;
}

Result<JobKeys> ensure_job_key_file(const std::string& path, bool create, std::chrono::milliseconds timeout) {
    if (create) {
        PSRUN_TRY_ASSIGN(auto keys, generate_job_keys());
        auto written = write_job_key_file(path, keys);
        if (!written && !std::filesystem::exists(path)) return tl::unexpected(written.error());
        // Either we wrote it or another creator won the race: the file on disk is the truth.
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
        auto keys = read_job_key_file(path);
        if (keys || keys.error().code != ErrorCode::kNotFound) return keys;
        if (std::chrono::steady_clock::now() >= deadline)
            return make_error(ErrorCode::kTimeout, "key file " + path + " did not appear within " +
                                                       std::to_string(timeout.count()) +
                                                       " ms: is rank 0 running and the directory shared?");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

std::string default_job_key_path(const std::string& model_dir, const std::string& job_id) {
    if (!model_dir.empty()) return model_dir + "/.psrun/job.key";
    const char* home = std::getenv("HOME");
    return std::string(home ? home : "/tmp") + "/.psrun/" + (job_id.empty() ? "local" : job_id) + ".key";
}

}  // namespace psrun
