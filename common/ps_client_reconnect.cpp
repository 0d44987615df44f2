// PsClient's wait for a lost psd (PsClientOptions::reconnect_wait; docs/reliability.md "A network
// that blinks"). A shard is lost when its connection drops or its heartbeats stop
// (common/ps_health.h); that alone cannot tell a dead psd from a network that blinked. So the
// client retries HELLO on a fresh socket until the psd answers or the wait is over, and compares
// the instance in its WELCOME with the one it knew:
//   - the same process: its parameters are intact; the request in flight is sent again (or its
//     stand-in: an exchange becomes a PULL, so no gradient is ever applied twice) and the caller
//     never notices, but for StepInfo::reconnected;
//   - another process (a restarted psd): restarted_shard() names it; the worker's recovery path
//     (workerd/ps_recovery.h) has the chief restore every shard from the newest checkpoint.
// Every attempt uses a new socket, so a late reply to an abandoned attempt can never be taken
// for the answer to a later request.
#include <spdlog/spdlog.h>
#include <zmq_addon.hpp>

#include <iterator>

#include "common/pause_detector.h"
#include "common/ps_client.h"
#include "common/zmq_util.h"

namespace psrun {

namespace {

using Clock = std::chrono::steady_clock;
using wire::FrameDesc;
using wire::Header;
using wire::MessageType;

// An attempt whose connection is not even up after this is abandoned for a fresh one.
constexpr std::chrono::milliseconds kUnconnectedAttempt{2000};
// How often a long wait says that it is still waiting.
constexpr std::chrono::seconds kProgressEvery{15};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

zmq::socket_t PsClient::new_socket(const std::string& endpoint) {
    zmq::socket_t s(context_, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    // A connect attempt to a host that does not answer (its link is down) is abandoned after 1 s and
    // retried, instead of waiting out the kernel's SYN back-off.
    s.set(zmq::sockopt::connect_timeout, 1000);
    if (options_.keys && uses_curve(endpoint) && options_.auth == AuthMode::kCurve)
        make_curve_client(s, *options_.keys);
    return s;
}

void PsClient::replace_socket(std::uint32_t shard) {
    links_->unwatch(shard);
    sockets_[shard] = new_socket(connect_endpoints_[shard]);  // linger 0: what the old one held is dropped
    links_->watch(shard);
    sockets_[shard].connect(connect_endpoints_[shard]);
}

void PsClient::resend_exchange(MessageType type, std::uint32_t shard) {
    Header h = make_header(type == MessageType::kPush ? MessageType::kHeartbeat : MessageType::kPull);
    if (type != MessageType::kPush && options_.wire_bf16 && !shm_shard_[shard]) h.flags |= wire::kFlagBf16;
    std::vector<zmq::message_t> payloads;  // the exchange's pulled rows, if any (its row gradients are not resent)
    if (type != MessageType::kPush)
        add_row_frames(shard, h, payloads, (h.flags & wire::kFlagBf16) ? PayloadForm::kBf16 : PayloadForm::kF32, false);
    send_message(shard, std::move(h), payloads);
}

std::optional<std::uint32_t> PsClient::lost_shard() {
    links_->update();
    for (auto i : all_shards())
        if (restarted_[i] || gave_up_[i]) return i;
    return links_->first_lost(all_shards());
}

std::optional<std::uint32_t> PsClient::restarted_shard() const {
    for (auto i : all_shards())
        if (restarted_[i]) return i;
    return std::nullopt;
}

Result<void> PsClient::ensure_links() {
    links_->update();
    if (link_error_) return tl::unexpected(*link_error_);
    for (auto i : all_shards()) {
        if (!links_->lost(i)) continue;
        if (options_.reconnect_wait.count() <= 0) return make_error(ErrorCode::kIo, links_->describe_loss(i));
        PSRUN_TRY(reconnect(i));
    }
    return {};
}

Result<std::uint32_t> PsClient::reconnect(std::uint32_t shard) {
    const std::string who = "ps " + std::to_string(shard) + " (" + options_.endpoints[shard] + ")";
    links_->settle(shard);
    const auto lost_at = links_->lost_at(shard);
    const auto silent_since = links_->silent_since(shard);
    const bool heartbeats = links_->lost_heartbeats(shard);
    const double budget = static_cast<double>(options_.reconnect_wait.count()) / 1000.0;
    const double hb = static_cast<double>(links_->heartbeat().count()) / 1000.0;
    if (heartbeats)
        spdlog::warn("no answer from {} for {:.0f} s; waiting up to {:g} s for it (network or psd?)", who,
                     seconds(Clock::now() - silent_since), budget);
    else
        spdlog::warn(
            "{} closed the connection; waiting up to {:g} s for it to answer again (psd restarted, or "
            "network?)",
            who, budget);
    const std::string body = wire::encode_hello(wire::Hello{options_.model, options_.tensors});
    Header hello = make_header(MessageType::kHello);
    hello.frames.push_back(FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body.size())});
    auto next_note = Clock::now() + kProgressEvery;
    std::vector<zmq::message_t> parts;
    while (parts.empty()) {
        // Our own stops (common/pause_detector.h) do not count: the psd gets the whole wait of our running time.
        const auto deadline = PauseDetector::process().window_start(lost_at) + options_.reconnect_wait;
        if (Clock::now() >= deadline) {
            gave_up_[shard] = true;
            link_error_ =
                Error{ErrorCode::kTimeout,
                      fmt::format("{} did not answer for {:.1f} s ({}--reconnect-wait {:g} s): giving up. Its "
                                  "host or network was down longer than that, or the psd died and was "
                                  "not restarted; the checkpoints in the model dir are intact: rerun the "
                                  "job to resume from the newest",
                                  who, seconds(Clock::now() - silent_since),
                                  heartbeats ? fmt::format("--heartbeat-timeout {:g} s + ", hb) : "", budget)};
            return tl::unexpected(*link_error_);
        }
        if (options_.interrupted && options_.interrupted())
            return make_error(ErrorCode::kIo, "stopped by a signal while waiting for " + who + " to answer again");
        if (Clock::now() >= next_note) {
            spdlog::warn("still no answer from {} after {:.0f} s; waiting up to {:.0f} s more", who,
                         seconds(Clock::now() - silent_since), seconds(deadline - Clock::now()));
            next_note = Clock::now() + kProgressEvery;
        }
        replace_socket(shard);
        send_plain(shard, hello, &body);
        const auto attempt = Clock::now();
        spdlog::debug("{}: HELLO on a fresh connection", who);
        std::vector<zmq::pollitem_t> items;
        while (Clock::now() < deadline && !(options_.interrupted && options_.interrupted())) {
            links_->update();
            const auto limit = links_->up(shard) ? options_.connect_timeout : kUnconnectedAttempt;
            if (Clock::now() - attempt > limit || links_->lost(shard)) {  // a fresh socket, a fresh try
                spdlog::debug("{}: no WELCOME after {:.1f} s (connection {}, {})", who, seconds(Clock::now() - attempt),
                              links_->up(shard) ? "up" : "not up", links_->lost(shard) ? "lost" : "not lost");
                break;
            }
            items.clear();
            items.push_back({sockets_[shard].handle(), 0, ZMQ_POLLIN, 0});
            links_->append_poll_items(items);
            zmq::poll(items, std::chrono::milliseconds(100));
            if (zmq::recv_multipart(sockets_[shard], std::back_inserter(parts), zmq::recv_flags::dontwait)) break;
        }
    }
    auto header = wire::decode_header(view(parts[0]));
    if (!header) return make_error(ErrorCode::kProtocol, who + ": " + header.error().message);
    PSRUN_TRY(open_reply(shard, *header, parts));
    if (header->type == MessageType::kError) {
        auto e = parts.size() > 1 ? wire::decode_error(view(parts[1])) : tl::unexpected(Error{});
        return make_error(e ? e->code : ErrorCode::kProtocol,
                          who + " answered again but refused this worker: " + (e ? e->reason : "(no reason)"));
    }
    auto welcome = header->type == MessageType::kWelcome && parts.size() == 2 ? wire::decode_welcome(view(parts[1]))
                                                                              : tl::unexpected(Error{});
    if (!welcome || welcome->shard != shard || (!layout_.slices.empty() && !(welcome->layout == layout_)))
        return make_error(ErrorCode::kProtocol, who + " answered HELLO again without its WELCOME");
    const double away = seconds(Clock::now() - silent_since);
    if (instances_[shard] != 0 && welcome->instance != instances_[shard]) {
        restarted_[shard] = true;
        spdlog::warn(
            "{} restarted: another psd process (instance {:016x}, was {:016x}) answers after {:.1f} s; the "
            "parameters it held are gone",
            who, welcome->instance, instances_[shard], away);
        link_error_ = Error{ErrorCode::kIo, who +
                                                " restarted (another psd process answers on its endpoint): its "
                                                "parameters must be restored from the newest checkpoint"};
        return tl::unexpected(*link_error_);
    }
    instances_[shard] = welcome->instance;
    ++reconnects_;
    if (shm_shard_[shard]) {  // the segment's attachment went with the old connection
        shm_shard_[shard] = false;
        spdlog::info("{}: payload frames from now on instead of shared memory", who);
    }
    const bool rejoined = header->flags & wire::kFlagRejoined;
    spdlog::warn("{} answers again after {:.1f} s: same instance, continuing{}", who, away,
                 rejoined ? fmt::format(" (it had declared this worker dead after its --worker-timeout {:g} s and "
                                        "takes it back)",
                                        static_cast<double>(header->aux) / 1000.0)
                          : "");
    return header->flags;
}

}  // namespace psrun
