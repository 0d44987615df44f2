#include "launcher/ports.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/unique_fd.h"

namespace psrun::launcher {

Result<int> port_block_count(int base) {
    const bool low = base >= 1024 && base + kPortsPerStep <= 32768;
    const bool high = base >= 61000 && base + kPortsPerStep <= 65536;
    if (!low && !high)
        return make_error(ErrorCode::kInvalidArgument, fmt::format("--port-base {}: use 1024..{} or 61000..{} (ports "
                                                                   "32768-60999 are the kernel's ephemeral range)",
                                                                   base, 32768 - kPortsPerStep, 65536 - kPortsPerStep));
    return ((low ? 32768 : 65536) - base) / kPortsPerStep;
}

Result<int> derived_port(std::uint32_t job_id, std::uint32_t step_id, int local_id, int base) {
    const Result<int> blocks = port_block_count(base);
    if (!blocks) return tl::unexpected(blocks.error());
    if (local_id < 0 || local_id >= kPortsPerStep)
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("{} tasks on one node need more than the {} derived ports "
                                      "per step: reserve ports with `srun --resv-ports=N`",
                                      local_id + 1, kPortsPerStep));
    const std::uint64_t key = static_cast<std::uint64_t>(job_id) * kStepSlots + step_id % kStepSlots;
    const int block = static_cast<int>(key % static_cast<std::uint64_t>(*blocks));
    return base + block * kPortsPerStep + local_id;
}

Result<void> check_port_free(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0)
        return make_error(ErrorCode::kIo,
                          fmt::format("cannot resolve host '{}' of this task: {}", host, ::gai_strerror(rc)));
    sockaddr_in addr{};
    std::memcpy(&addr, found->ai_addr, sizeof addr);
    ::freeaddrinfo(found);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return make_error(ErrorCode::kIo, fmt::format("socket: {}", std::strerror(errno)));
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        const int err = errno;
        char ip[INET_ADDRSTRLEN] = {};
        ::inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof ip);
        if (err == EADDRINUSE)
            return make_error(ErrorCode::kIo, fmt::format("port {} on {} ({}) is already in use: another job or "
                                                          "daemon holds it; choose another --port-base or "
                                                          "reserve ports with `srun --resv-ports`",
                                                          port, host, ip));
        return make_error(ErrorCode::kIo,
                          fmt::format("cannot bind {}:{} ({}): {}", host, port, ip, std::strerror(err)));
    }
    return {};
}

Result<std::vector<int>> free_local_ports(int count) {
    std::vector<UniqueFd> held;  // keep all open so the kernel hands out distinct ports
    std::vector<int> ports;
    for (int i = 0; i < count; ++i) {
        UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
            return make_error(ErrorCode::kIo,
                              fmt::format("cannot pick a free port on 127.0.0.1: {}", std::strerror(errno)));
        ports.push_back(ntohs(addr.sin_port));
        held.push_back(std::move(fd));
    }
    return ports;
}

}  // namespace psrun::launcher
