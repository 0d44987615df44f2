// Node addresses for a Slurm map: node names by default, or the IPv4 addresses of a named
// interface (e.g. ib0). A task can read only its own node's interface, so a map spanning several
// nodes needs the other nodes' addresses as a --node-addrs list (gathered with `psrun addr`).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace psrun::launcher {

// The first IPv4 address of interface `name` on this host (getifaddrs). kNotFound names the
// interface when it does not exist or has no IPv4 address.
[[nodiscard]] Result<std::string> interface_ipv4(const std::string& name);

// Parses "n1=10.0.0.1,n2=10.0.0.2" (commas, spaces or newlines separate entries).
[[nodiscard]] Result<std::map<std::string, std::string>> parse_node_addrs(std::string_view text);

struct AddressOptions {
    std::string interface;   // empty: use node names
    std::string node_addrs;  // "node=addr,..."; used with `interface`
    bool no_ib = false;      // keep node names even if `interface` is set
};

// One address per node (same order as `nodes`). `self_node` is the calling task's node, or ""
// when there is none (preview). With an interface: the own node's address is read from the
// interface; the others come from node_addrs, which must cover every node and agree with the
// interface on the own node.
[[nodiscard]] Result<std::vector<std::string>> node_addresses(const std::vector<std::string>& nodes,
                                                              const std::string& self_node,
                                                              const AddressOptions& options);

}  // namespace psrun::launcher
