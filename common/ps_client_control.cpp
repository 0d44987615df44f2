// PsClient's control requests (docs/protocol.md): INIT "restored", SAVE, RESTORE, DIRCHECK,
// DONE, HEARTBEAT, the drain request, STATS and STOP. Each goes to every shard (or one) through
// control_request(), whose collect() reconnects to a psd lost meanwhile and sends it again.
#include "common/ps_client.h"

#include <nlohmann/json.hpp>

#include "common/zmq_util.h"

namespace psrun {

using wire::FrameDesc;
using wire::Header;
using wire::MessageType;

namespace {

// `h` (from make_header()) for global step `step`, with `flags` added.
Header stamped(Header h, std::uint64_t step = 0, std::uint32_t flags = 0) {
    h.step = step;
    h.flags |= flags;
    return h;
}

Result<void> check_request_path(const std::string& dir) {
    if (auto ok = wire::check_path(dir); !ok) return make_error(ErrorCode::kInvalidArgument, ok.error().message);
    return {};
}

}  // namespace

Result<std::vector<PsClient::Reply>> PsClient::control_request(const std::vector<std::uint32_t>& shards, Header header,
                                                               const std::string* body,
                                                               std::chrono::milliseconds timeout) {
    if (body != nullptr) header.frames.push_back(FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body->size())});
    for (auto i : shards) send_plain(i, header, body);
    return collect(shards, timeout, [&](std::uint32_t i, bool) { send_plain(i, header, body); });
}

Result<void> PsClient::init_restored(const wire::InitConfig& config) {
    const std::string body = wire::encode_init(config);
    PSRUN_TRY(control_request(all_shards(), stamped(make_header(MessageType::kInit), 0, wire::kFlagRestored), &body,
                              options_.reply_timeout));
    return {};
}

Result<void> PsClient::save(std::uint64_t global_step, const std::string& dir) {
    PSRUN_TRY(check_request_path(dir));
    const std::string body = wire::encode_save(dir);
    PSRUN_TRY(control_request(all_shards(), stamped(make_header(MessageType::kSave), global_step), &body,
                              options_.reply_timeout));
    return {};
}

Result<std::vector<std::uint32_t>> PsClient::save_background(std::uint64_t global_step, const std::string& dir,
                                                             const std::vector<std::uint32_t>& shards) {
    PSRUN_TRY(check_request_path(dir));
    const std::string body = wire::encode_save(dir);
    PSRUN_TRY_ASSIGN(
        auto replies,
        control_request(shards, stamped(make_header(MessageType::kSave), global_step, wire::kFlagBackground), &body,
                        options_.reply_timeout));
    std::vector<std::uint32_t> writing;
    for (auto i : shards)
        if (replies[i].header.flags & wire::kFlagBackground) writing.push_back(i);
    return writing;
}

Result<void> PsClient::restore(const wire::InitConfig& config, const std::string& dir) {
    PSRUN_TRY(check_request_path(dir));
    const std::string body = wire::encode_restore(wire::RestoreRequest{config, dir});
    PSRUN_TRY(
        control_request(all_shards(), stamped(make_header(MessageType::kRestore)), &body, options_.reply_timeout));
    return {};
}

Result<void> PsClient::dir_check(const std::string& dir, const std::string& nonce) {
    PSRUN_TRY(check_request_path(dir));
    const std::string body = wire::encode_dircheck(wire::DirCheckRequest{dir, nonce});
    PSRUN_TRY(
        control_request(all_shards(), stamped(make_header(MessageType::kDirCheck)), &body, options_.connect_timeout));
    return {};
}

Result<void> PsClient::done(bool preempted) {
    // reply_timeout: a psd may be busy writing the chief's checkpoint (a large sparse table takes
    // tens of seconds); a psd that died is seen at once by the link monitor whatever this is.
    PSRUN_TRY(control_request(all_shards(),
                              stamped(make_header(MessageType::kDone), 0, preempted ? wire::kFlagDraining : 0u),
                              nullptr, options_.reply_timeout));
    return {};
}

Result<void> PsClient::heartbeat() {
    PSRUN_TRY(control_request(all_shards(), stamped(make_header(MessageType::kHeartbeat)), nullptr,
                              options_.connect_timeout));
    return {};
}

Result<std::uint64_t> PsClient::drain() {
    PSRUN_TRY_ASSIGN(
        auto replies,
        control_request(all_shards(), stamped(make_header(MessageType::kHeartbeat), 0, wire::kFlagDraining), nullptr,
                        options_.connect_timeout));
    return replies[0].header.step;
}

Result<nlohmann::json> PsClient::stats(std::uint32_t shard) {
    PSRUN_TRY_ASSIGN(auto replies, control_request({shard}, stamped(make_header(MessageType::kStats)), nullptr,
                                                   options_.connect_timeout));
    auto& r = replies[shard];
    if (r.frames.size() != 1) return make_error(ErrorCode::kProtocol, "STATS reply without body");
    auto j = nlohmann::json::parse(view(r.frames[0]), nullptr, false);
    if (j.is_discarded()) return make_error(ErrorCode::kProtocol, "STATS reply is not JSON");
    return j;
}

Result<void> PsClient::stop(std::uint32_t shard) {
    PSRUN_TRY(control_request({shard}, stamped(make_header(MessageType::kStop)), nullptr, options_.connect_timeout));
    return {};
}

}  // namespace psrun
