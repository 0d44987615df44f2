#include "launcher/addresses.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <netinet/in.h>

namespace psrun::launcher {

Result<std::string> interface_ipv4(const std::string& name) {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0)
        return make_error(ErrorCode::kIo, "getifaddrs failed: cannot list network interfaces");
    std::string found;
    bool exists = false;
    for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
        if (it->ifa_name == nullptr || name != it->ifa_name) continue;
        exists = true;
        if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
        char ip[INET_ADDRSTRLEN] = {};
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, ip, sizeof ip);
        found = ip;
        break;
    }
    ::freeifaddrs(list);
    if (found.empty())
        return make_error(ErrorCode::kNotFound,
                          exists ? fmt::format("--interface {}: the interface has no IPv4 address", name)
                                 : fmt::format("--interface {}: no such interface on this node "
                                               "(use --no-ib to keep node names)",
                                               name));
    return found;
}

Result<std::map<std::string, std::string>> parse_node_addrs(std::string_view text) {
    std::map<std::string, std::string> out;
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t end = text.find_first_of(", \n\t", pos);
        const std::string_view item = text.substr(pos, end == std::string_view::npos ? end : end - pos);
        pos = end == std::string_view::npos ? text.size() : end + 1;
        if (item.empty()) continue;
        const size_t eq = item.find('=');
        if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size())
            return make_error(ErrorCode::kInvalidArgument, fmt::format("--node-addrs: '{}' is not node=address", item));
        const std::string node(item.substr(0, eq));
        if (!out.emplace(node, std::string(item.substr(eq + 1))).second)
            return make_error(ErrorCode::kInvalidArgument,
                              fmt::format("--node-addrs: node '{}' is listed twice", node));
    }
    return out;
}

Result<std::vector<std::string>> node_addresses(const std::vector<std::string>& nodes, const std::string& self_node,
                                                const AddressOptions& options) {
    if (options.no_ib || options.interface.empty()) return nodes;
    PSRUN_TRY_ASSIGN(auto listed, parse_node_addrs(options.node_addrs));
    std::string own;
    if (!self_node.empty()) {
        PSRUN_TRY_ASSIGN(auto ip, interface_ipv4(options.interface));
        own = ip;
    }
    std::vector<std::string> out;
    for (const std::string& node : nodes) {
        const auto it = listed.find(node);
        if (node == self_node) {
            if (it != listed.end() && it->second != own)
                return make_error(ErrorCode::kInvalidArgument,
                                  fmt::format("--node-addrs gives {}={} but {} has {} on {}", node, it->second,
                                              options.interface, own, node));
            out.push_back(own);
        } else if (it != listed.end()) {
            out.push_back(it->second);
        } else {
            return make_error(ErrorCode::kInvalidArgument,
                              fmt::format("--interface {}: the address of node '{}' is unknown; "
                                          "give --node-addrs with every node (see `psrun addr`) "
                                          "or use --no-ib",
                                          options.interface, node));
        }
    }
    return out;
}

}  // namespace psrun::launcher
