#include "common/zmq_util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <filesystem>
#include <thread>

namespace psrun {

Result<std::string> normalize_endpoint(std::string_view ep) {
    if (ep.starts_with("ipc://")) {
        if (ep.size() == 6) return make_error(ErrorCode::kInvalidArgument, "empty ipc path in endpoint");
        return std::string(ep);
    }
    std::string_view rest = ep.starts_with("tcp://") ? ep.substr(6) : ep;
    if (rest.find("://") != std::string_view::npos)
        return make_error(ErrorCode::kInvalidArgument,
                          "endpoint '" + std::string(ep) + "': only tcp:// and ipc:// are supported");
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == rest.size())
        return make_error(ErrorCode::kInvalidArgument,
                          "endpoint '" + std::string(ep) + "' is not HOST:PORT, tcp://HOST:PORT or ipc:///path");
    const auto port = rest.substr(colon + 1);
    if (port != "*" && port.find_first_not_of("0123456789") != std::string_view::npos)
        return make_error(ErrorCode::kInvalidArgument, "endpoint '" + std::string(ep) + "' has a bad port");
    return "tcp://" + std::string(rest);
}

Result<std::string> bindable_endpoint(std::string_view endpoint) {
    auto ep = normalize_endpoint(endpoint);
    if (!ep) return ep;
    if (ep->starts_with("ipc://")) {
        const std::filesystem::path dir = std::filesystem::path(ep->substr(6)).parent_path();
        std::error_code ec;
        if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
            return make_error(ErrorCode::kInvalidArgument,
                              "ipc endpoint directory " + dir.string() + " does not exist: create it first");
        return ep;
    }
    const std::string rest = ep->substr(6);
    const auto colon = rest.rfind(':');
    const std::string host = rest.substr(0, colon), port = rest.substr(colon + 1);
    in_addr addr{};
    if (host == "*" || inet_pton(AF_INET, host.c_str(), &addr) == 1) return ep;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr)
        return make_error(ErrorCode::kInvalidArgument, "cannot resolve host '" + host + "' of endpoint " + *ep);
    char buf[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf);
    freeaddrinfo(res);
    return "tcp://" + std::string(buf) + ":" + port;
}

bool uses_curve(std::string_view endpoint) { return !endpoint.starts_with("ipc://"); }

void make_curve_server(zmq::socket_t& socket, const JobKeys& keys) {
    socket.set(zmq::sockopt::zap_domain, kZapDomain);
    socket.set(zmq::sockopt::curve_server, true);
    socket.set(zmq::sockopt::curve_secretkey, keys.server_secret);
}

void make_curve_client(zmq::socket_t& socket, const JobKeys& keys) {
    socket.set(zmq::sockopt::curve_serverkey, keys.server_public);
    socket.set(zmq::sockopt::curve_publickey, keys.client_public);
    socket.set(zmq::sockopt::curve_secretkey, keys.client_secret);
}

namespace {
void release_hold(void* /*data*/, void* hint) {
    static_cast<std::atomic<int>*>(hint)->fetch_sub(1, std::memory_order_release);
}
}  // namespace

zmq::message_t zero_copy_message(const void* bytes, std::size_t size, std::atomic<int>& holds) {
    holds.fetch_add(1, std::memory_order_relaxed);
    return zmq::message_t(const_cast<void*>(bytes), size, &release_hold, &holds);
}

void wait_released(const std::atomic<int>& holds) {
    while (holds.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

std::vector<std::string> split_endpoint_list(const std::string& list) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= list.size()) {
        const auto comma = list.find(',', start);
        const auto end = comma == std::string::npos ? list.size() : comma;
        if (end > start) out.push_back(list.substr(start, end - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

}  // namespace psrun
