// libFuzzer target for the TensorFlow-style cluster sources: TF_CONFIG (JSON) and the TF 1.x
// flags --ps_hosts/--worker_hosts/--job_name/--task_index. The first byte picks the source;
// for the flags the rest is four lines, one per flag.
// Contract checked: never a crash or an exception; every accepted map validates, has at
// least one worker, and places the caller at a rank of the right role.
// Built and run by test/fuzz/fuzz.sh tf_config.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "launcher/tf_cluster.h"

namespace {

void check_map(const psrun::ClusterMap& map) {
    if (!map.validate().empty()) __builtin_trap();
    if (map.worker.empty() || !map.self) __builtin_trap();
    if (map.slots.size() != map.ps.size() + map.worker.size() + map.evaluator.size()) __builtin_trap();
    const auto& self = *map.self;
    if (self.rank < 0 || static_cast<std::size_t>(self.rank) >= map.slots.size()) __builtin_trap();
    if (map.slots[static_cast<std::size_t>(self.rank)].role != self.role) __builtin_trap();
}

std::string_view next_line(std::string_view& rest) {
    const std::size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    return line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::launcher;
    if (size == 0) return 0;
    std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    if (data[0] % 2 == 0) {
        const auto map = map_from_tf_config(std::string(rest));
        if (map) check_map(*map);
        else if (map.error().message.rfind("TF_CONFIG", 0) != 0) __builtin_trap();  // names the source
        return 0;
    }
    TfFlags flags;
    flags.ps_hosts = std::string(next_line(rest));
    flags.worker_hosts = std::string(next_line(rest));
    flags.job_name = std::string(next_line(rest));
    const std::string_view index = next_line(rest);
    int value = 0;
    if (std::from_chars(index.data(), index.data() + index.size(), value).ec == std::errc()) flags.task_index = value;
    const auto map = map_from_tf_flags(flags);
    if (map) check_map(*map);
    return 0;
}
