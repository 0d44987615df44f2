#include "launcher/cmd_plan.h"

#include <unistd.h>

#include <iostream>
#include <memory>

#include "common/result.h"
#include "common/utf8.h"
#include "launcher/addresses.h"
#include "launcher/launch_options.h"
#include "launcher/map_builder.h"

namespace psrun::launcher {

void add_plan_command(CLI::App& app, CommandContext& ctx) {
    auto options = std::make_shared<MapOptions>();
    auto json = std::make_shared<bool>(false);
    CLI::App* cmd =
        app.add_subcommand("plan",
                           "Print the cluster map as seen by the calling task (inside `srun`, from TF_CONFIG "
                           "or TF-style flags, or a preview with --nodelist)");
    cmd->add_flag("--json", *json,
                  "print one JSON object: {\"ps\": [...], \"worker\": [...], \"chief\": ..., "
                  "\"self\": {...}, ...}");
    add_map_options(cmd, *options, true);
    cmd->footer(
        "Rank = slot index: tasks listed node by node in nodelist order, by local id "
        "within a node. Equals SLURM_PROCID under block distribution; with -m cyclic or "
        "arbitrary the task's SLURM_PROCID is shown as self.procid.");
    cmd->callback([options, json, &ctx] {
        auto map = resolve_map(*options, ctx.env);
        if (!map) throw UsageError(map.error().message);
        if (*json) std::cout << json_text(map->to_json()) << std::endl;
        else std::cout << map->to_table() << std::flush;
        ctx.exit_code = kExitOk;
    });
}

void add_addr_command(CLI::App& app, CommandContext& ctx) {
    auto interface = std::make_shared<std::string>();
    CLI::App* cmd = app.add_subcommand("addr",
                                       "Print NODE=IPv4 of an interface on this node (run one per node with srun, join "
                                       "the lines with commas, pass them as --node-addrs)");
    cmd->add_option("--interface", *interface, "interface name, e.g. ib0")->required();
    cmd->callback([interface, &ctx] {
        auto ip = interface_ipv4(*interface);
        if (!ip) throw UsageError(ip.error().message);
        std::string node;
        if (auto name = env_get(ctx.env, "SLURMD_NODENAME")) {
            node = *name;
        } else {
            char host[256] = {};
            ::gethostname(host, sizeof host - 1);
            node = host;
        }
        std::cout << node << '=' << *ip << std::endl;
        ctx.exit_code = kExitOk;
    });
}

}  // namespace psrun::launcher
