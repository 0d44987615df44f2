// PsClient's control requests (docs/protocol.md): INIT "restored", SAVE, RESTORE, DIRCHECK,
// DONE, HEARTBEAT, the drain request, STATS and STOP. Each goes to every shard (or one) and waits
// for the replies through collect(), which reconnects to a psd lost meanwhile and sends again.
#include "common/ps_client.h"

#include <nlohmann/json.hpp>

#include "common/zmq_util.h"

namespace psrun {

using wire::FrameDesc;
using wire::Header;
using wire::MessageType;

Result<void> PsClient::init_restored(const wire::InitConfig& config) {
    Header h = make_header(MessageType::kInit);
    h.flags = wire::kFlagRestored;
    const std::string body = wire::encode_init(config);
    h.frames.push_back(FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body.size())});
    for (auto i : all_shards()) send_plain(i, h, &body);
    auto replies = collect(all_shards(), options_.reply_timeout, [&](std::uint32_t i, bool) { send_plain(i, h, &body); });
    if (!replies) return tl::unexpected(replies.error());
    return {};
}

Result<void> PsClient::save(std::uint64_t global_step, const std::string& dir) {
    if (auto ok = wire::check_path(dir); !ok) return make_error(ErrorCode::kInvalidArgument, ok.error().message);
    Header h = make_header(MessageType::kSave);
    h.step = global_step;
    const std::string body = wire::encode_save(dir);
    h.frames.push_back(FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body.size())});
    for (auto i : all_shards()) send_plain(i, h, &body);
    auto replies = collect(all_shards(), options_.reply_timeout, [&](std::uint32_t i, bool) { send_plain(i, h, &body); });
    if (!replies) return tl::unexpected(replies.error());
    return {};
}

Result<std::vector<std::uint32_t>> PsClient::save_background(std::uint64_t global_step, const std::string& dir,
                                                             const std::vector<std::uint32_t>& shards) {
    if (auto ok = wire::check_path(dir); !ok) return make_error(ErrorCode::kInvalidArgument, ok.error().message);
    Header h = make_header(MessageType::kSave);
    h.step = global_step;
    h.flags = wire::kFlagBackground;
    const std::string body = wire::encode_save(dir);
    h.frames.push_back(FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body.size())});
    for (auto i : shards) send_plain(i, h, &body);
    auto replies = collect(shards, options_.reply_timeout, [&](std::uint32_t i, bool) { send_plain(i, h, &body); });
    if (!replies) return tl::unexpected(replies.error());
    std::vector<std::uint32_t> writing;
    for (auto i : shards)
        if ((*replies)[i].header.flags & wire::kFlagBackground) writing.push_back(i);
    return writing;
}

Result<void> PsClient::restore(const wire::InitConfig& config, const std::string& dir) {
    if (auto ok = wire::check_path(dir); !ok) return make_error(ErrorCode::kInvalidArgument, ok.error().message);
    Header h = make_header(MessageType::kRestore);
    const std::string body = wire::encode_restore(wire::RestoreRequest{config, dir});
    h.frames.push_back(FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body.size())});
    for (auto i : all_shards()) send_plain(i, h, &body);
    auto replies = collect(all_shards(), options_.reply_timeout, [&](std::uint32_t i, bool) { send_plain(i, h, &body); });
    if (!replies) return tl::unexpected(replies.error());
    return {};
}

Result<void> PsClient::dir_check(const std::string& dir, const std::string& nonce) {
    if (auto ok = wire::check_path(dir); !ok) return make_error(ErrorCode::kInvalidArgument, ok.error().message);
    Header h = make_header(MessageType::kDirCheck);
    const std::string body = wire::encode_dircheck(wire::DirCheckRequest{dir, nonce});
    h.frames.push_back(FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body.size())});
    for (auto i : all_shards()) send_plain(i, h, &body);
    auto replies = collect(all_shards(), options_.connect_timeout, [&](std::uint32_t i, bool) { send_plain(i, h, &body); });
    if (!replies) return tl::unexpected(replies.error());
    return {};
}

Result<void> PsClient::done(bool preempted) {
    Header h = make_header(MessageType::kDone);
    if (preempted) h.flags = wire::kFlagDraining;
    for (auto i : all_shards()) send_plain(i, h, nullptr);
    // reply_timeout: a psd may be busy writing the chief's checkpoint (a large sparse table takes
    // tens of seconds); a psd that died is seen at once by the link monitor whatever this is.
    auto replies = collect(all_shards(), options_.reply_timeout, [&](std::uint32_t i, bool) { send_plain(i, h, nullptr); });
    if (!replies) return tl::unexpected(replies.error());
    return {};
}

Result<void> PsClient::heartbeat() {
    for (auto i : all_shards()) send_plain(i, make_header(MessageType::kHeartbeat), nullptr);
    auto replies = collect(all_shards(), options_.connect_timeout,
                           [&](std::uint32_t i, bool) { send_plain(i, make_header(MessageType::kHeartbeat), nullptr); });
    if (!replies) return tl::unexpected(replies.error());
    return {};
}

Result<std::uint64_t> PsClient::drain() {
    Header h = make_header(MessageType::kHeartbeat);
    h.flags = wire::kFlagDraining;
    for (auto i : all_shards()) send_plain(i, h, nullptr);
    auto replies = collect(all_shards(), options_.connect_timeout, [&](std::uint32_t i, bool) { send_plain(i, h, nullptr); });
    if (!replies) return tl::unexpected(replies.error());
    return (*replies)[0].header.step;
}

Result<nlohmann::json> PsClient::stats(std::uint32_t shard) {
    send_plain(shard, make_header(MessageType::kStats), nullptr);
    auto replies = collect({shard}, options_.connect_timeout,
                           [&](std::uint32_t i, bool) { send_plain(i, make_header(MessageType::kStats), nullptr); });
    if (!replies) return tl::unexpected(replies.error());
    auto& r = (*replies)[shard];
    if (r.frames.size() != 1) return make_error(ErrorCode::kProtocol, "STATS reply without body");
    auto j = nlohmann::json::parse(view(r.frames[0]), nullptr, false);
    if (j.is_discarded()) return make_error(ErrorCode::kProtocol, "STATS reply is not JSON");
    return j;
}

Result<void> PsClient::stop(std::uint32_t shard) {
    send_plain(shard, make_header(MessageType::kStop), nullptr);
    auto replies = collect({shard}, options_.connect_timeout,
                           [&](std::uint32_t i, bool) { send_plain(i, make_header(MessageType::kStop), nullptr); });
    if (!replies) return tl::unexpected(replies.error());
    return {};
}

}  // namespace psrun
