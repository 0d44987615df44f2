// launcher/join_file.h and --max-workers in daemon_command (issue 38, psrun join): the join file
// round trip, its refusals, and what psrun local/run put in it from psd's command line.
#include "launcher/join_file.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "launcher/daemon_command.h"
#include "launcher/map_builder.h"

using namespace psrun;
using namespace psrun::launcher;

namespace {

ClusterMap one_ps_two_workers() {
    auto m = local_map(1, 2, 0, {"n1:20000", "n1:20001", "n1:20002"});
    return *m;
}

}  // namespace

TEST_CASE("join file: psd's --max-workers leaves room, the file says where psd is", "[join]") {
    DaemonOptions o;
    o.training = {"--model-dir", "/m", "--data-chunks", "60"};
    o.key_file = "/k";
    o.max_workers = 4;
    o.run_id = "slurm-7";
    const auto cmd = daemon_command(one_ps_two_workers(), Role::kPs, 0, o);
    REQUIRE(cmd);
    const auto info = join_info_from_psd(cmd->argv);
    REQUIRE(info);
    CHECK(info->ps == "tcp://n1:20000");
    CHECK(info->key_file == "/k");
    CHECK(info->run_id == "slurm-7");
    CHECK(info->num_workers == 2);
    CHECK(info->max_workers == 4);
    auto back = decode_join_info(encode_join_info(*info), "x");
    REQUIRE(back);
    CHECK(back->ps == info->ps);
    CHECK(back->max_workers == 4);
    // No room (M == W, or no --max-workers): no join file.
    o.max_workers = 2;
    CHECK_FALSE(join_info_from_psd(daemon_command(one_ps_two_workers(), Role::kPs, 0, o)->argv));
    o.max_workers.reset();
    CHECK_FALSE(join_info_from_psd(daemon_command(one_ps_two_workers(), Role::kPs, 0, o)->argv));
    // Fewer than the map's workers is refused, naming the flag.
    o.max_workers = 1;
    const auto refused = daemon_command(one_ps_two_workers(), Role::kPs, 0, o);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message.find("--max-workers 1") != std::string::npos);
}

TEST_CASE("join file: malformed files are refused naming the path", "[join]") {
    CHECK_FALSE(decode_join_info("not json", "/m/.psrun/join.json"));
    CHECK_FALSE(decode_join_info("{}", "/m/.psrun/join.json"));
    JoinInfo bad{"ipc:///x", "/k", false, "", "r", 2, 2};  // no room
    auto r = decode_join_info(encode_join_info(bad), "/m/.psrun/join.json");
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("/m/.psrun/join.json") != std::string::npos);
    JoinInfo nokey{"ipc:///x", "", false, "", "r", 2, 4};
    CHECK_FALSE(decode_join_info(encode_join_info(nokey), "f"));
    JoinInfo auth{"ipc:///x", "/k", false, "rot13", "r", 2, 4};
    CHECK_FALSE(decode_join_info(encode_join_info(auth), "f"));
}

TEST_CASE("join file: written and read back in a model dir; none there is kNotFound", "[join]") {
    const auto dir = std::filesystem::temp_directory_path() / ("psrun-join-file-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    auto missing = read_join_info(dir.string());
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == psrun::ErrorCode::kNotFound);
    JoinInfo info{"ipc:///x/ps-0", "", true, "", "local-h-1", 2, 3};
    REQUIRE(write_join_info(dir.string(), info));
    auto read = read_join_info(dir.string());
    REQUIRE(read);
    CHECK(read->no_auth);
    CHECK(read->max_workers == 3);
    std::filesystem::remove_all(dir);
}
