#include "common/ps_client.h"

#include <algorithm>
#include <cstring>

#include "common/pause_detector.h"
#include "common/ps_client_rows.h"
#include "common/wire_precision.h"
#include "common/zmq_util.h"

#include <iterator>

#include <spdlog/spdlog.h>

namespace psrun {
namespace {
// How long a shard whose connection dropped may still deliver a reply it sent before (collect()).
constexpr std::chrono::milliseconds kLossGrace{1000};
}  // namespace

using wire::FrameDesc;
using wire::Header;
using wire::MessageType;

std::span<const float> ParamFrames::slice(std::uint32_t id) const {
    return id < by_slice_.size() ? by_slice_[id] : std::span<const float>{};
}

void ParamFrames::copy_to(std::span<float> params, const ShardLayout& layout) const {
    for (std::uint32_t id = 0; id < layout.slices.size() && id < by_slice_.size(); ++id) {
        const auto& s = layout.slices[id];
        float* to = params.data() + s.flat_offset;
        if (to != by_slice_[id].data())  // a shared-memory reply may already be the model's buffer
            std::memcpy(to, by_slice_[id].data(), s.length * sizeof(float));
    }
}

PsClient::PsClient(PsClientOptions options) : options_(std::move(options)), context_(1) {
    std::vector<std::string> normalized_endpoints;
    for (const auto& ep : options_.endpoints) {
        auto normalized = normalize_endpoint(ep);
        if (!normalized) throw std::invalid_argument(normalized.error().message);
        const bool secured = options_.keys && uses_curve(*normalized);
        mac_shard_.push_back(secured && options_.auth == AuthMode::kMac);
        sockets_.push_back(new_socket(*normalized));
        normalized_endpoints.push_back(*normalized);
    }
    if (options_.keys && options_.auth == AuthMode::kMac) {
        mac_team_ = std::make_unique<ThreadTeam>(2);
        sealer_ = std::make_unique<MessageSealer>(*options_.keys, mac_team_.get());
    }
    const auto curve_keys = options_.auth == AuthMode::kCurve ? options_.keys : std::nullopt;
    links_ = std::make_unique<LinkMonitor>(context_, sockets_, options_.endpoints, normalized_endpoints, curve_keys,
                                           options_.heartbeat_timeout);  // before connect
    for (std::size_t i = 0; i < sockets_.size(); ++i) sockets_[i].connect(normalized_endpoints[i]);
    if (options_.keys) options_.token = options_.keys->token;
    shm_shard_.assign(sockets_.size(), false);
    connect_endpoints_ = std::move(normalized_endpoints);
    instances_.assign(sockets_.size(), 0);
    restarted_.assign(sockets_.size(), false);
    gave_up_.assign(sockets_.size(), false);
}

PsClient::~PsClient() {
    sockets_.clear();  // linger 0: pending sends are dropped and their buffers released
    wait_released(holds_);
}

std::vector<std::uint32_t> PsClient::all_shards() const {
    std::vector<std::uint32_t> v(sockets_.size());
    for (std::uint32_t i = 0; i < v.size(); ++i) v[i] = i;
    return v;
}

Header PsClient::make_header(MessageType type) const {
    Header h;
    h.type = type;
    h.role = options_.role;
    h.token = options_.token;
    h.index = options_.index;
    if (type == MessageType::kHello && options_.join) h.flags |= wire::kFlagJoin;  // reconnects' HELLOs too
    return h;
}

Result<std::vector<PsClient::Reply>> PsClient::collect(const std::vector<std::uint32_t>& shards,
                                                       std::chrono::milliseconds timeout, const Resend& resend) {
    if (link_error_) return tl::unexpected(*link_error_);  // a psd given up, or restarted: see lost_shard()
    std::vector<Reply> replies(sockets_.size());
    std::vector<bool> got(sockets_.size(), false);
    std::size_t missing = shards.size();
    std::optional<Error> refusal;
    // The timeout restarts when this process was itself stopped meanwhile (common/pause_detector.h):
    // psd gets a full `timeout` of our running time to answer.
    auto started = std::chrono::steady_clock::now();
    std::vector<std::optional<std::chrono::steady_clock::time_point>> lost_since(sockets_.size());
    std::vector<zmq::pollitem_t> items;
    while (missing > 0) {
        items.clear();
        for (auto i : shards)
            if (!got[i]) items.push_back({sockets_[i].handle(), 0, ZMQ_POLLIN, 0});
        links_->append_poll_items(items);  // a psd that dies mid-request wakes us up
        links_->update();
        // A reply sent just before psd exited is still read: the probe's connection may close before
        // the reply has crossed the data connection (a psd that exits right after ACKing the last DONE),
        // so a lost shard gets kLossGrace to deliver it.
        bool in_grace = false, reconnected = false;
        for (auto i : shards) {
            if (got[i] || !links_->lost(i) || (sockets_[i].get(zmq::sockopt::events) & ZMQ_POLLIN)) continue;
            if (!lost_since[i]) lost_since[i] = std::chrono::steady_clock::now();
            if (std::chrono::steady_clock::now() - *lost_since[i] <= kLossGrace) {
                in_grace = true;
                continue;
            }
            if (!resend || options_.reconnect_wait.count() <= 0)
                return make_error(ErrorCode::kIo, links_->describe_loss(i));
            PSRUN_TRY_ASSIGN(auto flags, reconnect(i));  // the same psd answers again: send the request anew
            resend(i, flags & wire::kFlagInitialized);
            lost_since[i].reset();
            started = std::chrono::steady_clock::now();  // a full timeout for the request sent anew
            reconnected = true;
        }
        if (reconnected) continue;  // the poll items name the old socket
        const auto deadline = PauseDetector::process().window_start(started) + timeout;
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        // Wake up at least every 250 ms: a stop of our own moves the deadline, and a psd excused after it
        // must answer its probe in time (common/ps_health.h).
        const auto wake = in_grace ? std::chrono::milliseconds(20) : std::chrono::milliseconds(250);
        const int ready = left.count() > 0 ? zmq::poll(items, std::min(left, wake)) : 0;
        if (ready == 0 && std::chrono::steady_clock::now() < PauseDetector::process().window_start(started) + timeout)
            continue;
        if (ready == 0) {
            std::string names;
            for (auto i : shards)
                if (!got[i])
                    names += (names.empty() ? "" : ", ") + std::to_string(i) + " (" + options_.endpoints[i] + ")";
            return make_error(ErrorCode::kTimeout, "no reply from ps " + names + " within " +
                                                       std::to_string(timeout.count()) +
                                                       " ms: is psd running, and is the key file the job's?");
        }
        for (auto i : shards) {
            if (got[i] || !(sockets_[i].get(zmq::sockopt::events) & ZMQ_POLLIN)) continue;
            std::vector<zmq::message_t> parts;
            if (!zmq::recv_multipart(sockets_[i], std::back_inserter(parts), zmq::recv_flags::dontwait)) continue;
            if (parts.empty()) return make_error(ErrorCode::kProtocol, "empty reply from ps " + std::to_string(i));
            auto header = wire::decode_header(view(parts[0]));
            if (!header)
                return make_error(ErrorCode::kProtocol, "ps " + std::to_string(i) + ": " + header.error().message);
            PSRUN_TRY(open_reply(i, *header, parts));
            std::vector<std::size_t> sizes;
            for (std::size_t p = 1; p < parts.size(); ++p) sizes.push_back(parts[p].size());
            if (auto ok = wire::check_frames(*header, sizes); !ok)
                return make_error(ErrorCode::kProtocol, "ps " + std::to_string(i) + ": " + ok.error().message);
            if (header->type == MessageType::kError && resend && options_.reconnect_wait.count() > 0) {
                // A protocol ERROR over a connection that was lost meanwhile comes from whoever holds the
                // endpoint now: a restarted psd that never had this worker's HELLO ("send HELLO first")
                // gets the request ZeroMQ queued for the dead one before the monitor's event is read.
                // That is the loss of the psd this request went to: the loop above reconnects and finds
                // out. psd's verdicts (aborted, unauthorized, rejected) stay refusals.
                links_->update();
                auto body = parts.size() > 1 ? wire::decode_error(view(parts[1])) : tl::unexpected(Error{});
                if (links_->lost(i) && body && body->code == ErrorCode::kProtocol) {
                    spdlog::debug("ps {}: an ERROR after its connection was lost: handled as that loss", i);
                    continue;
                }
            }
            got[i] = true;
            --missing;
            if (header->type == MessageType::kError) {  // keep collecting: no reply may stay queued
                auto body = parts.size() > 1 ? wire::decode_error(view(parts[1])) : tl::unexpected(Error{});
                if (!refusal)
                    refusal =
                        Error{body ? body->code : ErrorCode::kProtocol,
                              "ps " + std::to_string(i) + " refused the request" +
                                  (mac_shard_[i] && !(header->flags & wire::kFlagMac) ? " (unsealed reply)" : "") +
                                  ": " + (body ? body->reason : std::string("(no reason)"))};
                continue;
            }
            parts.erase(parts.begin());
            replies[i] = Reply{std::move(*header), std::move(parts)};
        }
    }
    if (refusal) return tl::unexpected(*refusal);
    return replies;
}

Result<void> PsClient::hello() {
    const std::string body = wire::encode_hello(wire::Hello{options_.model, options_.tensors});
    PSRUN_TRY_ASSIGN(auto replies,
                     control_request(all_shards(), make_header(MessageType::kHello), &body, options_.connect_timeout));
    PSRUN_TRY_ASSIGN(auto expected, compute_layout(options_.tensors, static_cast<std::uint32_t>(sockets_.size())));
    initialized_ = true;
    for (auto i : all_shards()) {
        auto& r = replies[i];
        if (r.header.type != MessageType::kWelcome || r.frames.size() != 1)
            return make_error(ErrorCode::kProtocol, "ps " + std::to_string(i) + " answered HELLO without WELCOME");
        PSRUN_TRY_ASSIGN(auto w, wire::decode_welcome(view(r.frames[0])));
        if (w.shard != i || !(w.layout == expected))
            return make_error(ErrorCode::kProtocol,
                              "ps " + std::to_string(i) +
                                  " sent a shard layout that differs from this worker's: "
                                  "check that --ps lists the same endpoints in the same order everywhere");
        initialized_ = initialized_ && (r.header.flags & wire::kFlagInitialized);
        instances_[i] = w.instance;
        if (i == 0) welcome_step_ = r.header.step;
        if (i == 0) sync_ = r.header.flags & wire::kFlagSync;
    }
    layout_ = expected;
    shard_slices_.clear();
    for (auto i : all_shards()) shard_slices_.push_back(layout_.slices_of(i));
    shm_ = ShmSegment{};
    shm_shard_.assign(sockets_.size(), false);
    if (options_.shared_memory) attach_shared_memory();
    return {};
}

Result<void> PsClient::init(const wire::InitConfig& config, std::span<const float> params, bool dry_run) {
    if (params.size() != layout_.total)
        return make_error(ErrorCode::kInvalidArgument, "init: parameter buffer has the wrong size");
    Header h = make_header(MessageType::kInit);
    if (dry_run) h.flags |= wire::kFlagDryRun;
    for (auto i : all_shards()) send_slices(i, h, params, PayloadForm::kF32, wire::encode_init(config));
    const std::string restored = wire::encode_init(config);
    auto replies = collect(all_shards(), options_.reply_timeout, [&](std::uint32_t i, bool initialized) {
        if (!initialized) return send_slices(i, h, params, PayloadForm::kF32, wire::encode_init(config));
        Header r = make_header(MessageType::kInit);  // the INIT arrived before the loss: keep its parameters
        r.flags = wire::kFlagRestored;
        r.frames.push_back(FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(restored.size())});
        send_plain(i, r, &restored);
    });
    wait_released(holds_);
    if (!replies) return tl::unexpected(replies.error());
    return {};
}

Result<StepInfo> PsClient::exchange(const Exchange& x) {
    const bool push = !x.grads.empty() || !x.row_grads.empty();
    const bool pull = x.params != nullptr || !x.pulls.empty();
    if (!push && !pull) return make_error(ErrorCode::kInvalidArgument, "an exchange pushes or pulls something");
    if (!x.pulls.empty() && !x.rows) return make_error(ErrorCode::kInvalidArgument, "pulled rows need a PulledRows");
    if (x.lookup && push) return make_error(ErrorCode::kInvalidArgument, "a lookup exchange pushes nothing");
    PSRUN_TRY(plan_rows(x.row_grads, x.pulls, x.lookup));
    const MessageType type = push && pull ? MessageType::kPushPull : push ? MessageType::kPush : MessageType::kPull;
    return run_exchange(type, x.grads, x.step, x.params, x.pulls.empty() ? nullptr : x.rows);
}

Result<StepInfo> PsClient::run_exchange(MessageType type, std::span<const float> grads, std::uint64_t step,
                                        ParamFrames* out, PulledRows* rows) {
    if (type != MessageType::kPull && grads.size() != layout_.total)
        return make_error(ErrorCode::kInvalidArgument, "gradient buffer has the wrong size");
    if (auto ok = ensure_links(); !ok) return tl::unexpected(ok.error());  // send nothing
    for (auto i : all_shards()) {
        Header h = make_header(type);
        h.step = step;
        send_exchange(i, std::move(h), grads);
    }
    bool resent = false;
    auto replies = collect(all_shards(), options_.reply_timeout, [&](std::uint32_t i, bool) {
        resent = true;
        resend_exchange(type, i);
    });
    if (!replies && lost_shard()) return tl::unexpected(replies.error());  // a hung psd never frees them: see header
    wait_released(holds_);
    if (!replies) return tl::unexpected(replies.error());
    StepInfo info;
    info.reconnected = resent;
    const auto& h0 = (*replies)[0].header;
    info.step = h0.step;
    info.all_finished = true;
    for (auto& r : *replies) {
        info.all_finished = info.all_finished && (r.header.flags & wire::kFlagFinished);
        info.finished = info.finished || (r.header.flags & wire::kFlagFinished);
        info.stale = info.stale || (r.header.flags & wire::kFlagStale);
        info.draining = info.draining || (r.header.flags & wire::kFlagDraining);
        if (r.header.flags & wire::kFlagRejoined) {
            info.rejoined = true;
            info.rejoined_timeout_ms = r.header.aux;
        }
    }
    // Shards count applied gradients independently, so the last pushes of a run can reach them in different
    // orders: a shard that already reached last_step refuses one that shard 0 still applies. The run is then
    // over at the furthest shard's step, not at shard 0's one-behind step.
    if (info.finished)
        for (auto& r : *replies) info.step = std::max(info.step, r.header.step);
    if (type == MessageType::kPush) return info;
    for (auto i : all_shards()) PSRUN_TRY(take_rows(i, (*replies)[i], wire::dense_frame_count((*replies)[i].header)));
    if (rows) finish_rows(*rows);
    if (!out) return info;
    out->frames_.clear();
    out->frames_.reserve(layout_.slices.size());
    out->by_slice_.assign(layout_.slices.size(), {});
    for (auto i : all_shards()) PSRUN_TRY(take_params(i, (*replies)[i], *out));
    return info;
}

Result<StepInfo> PsClient::pull(std::span<float> params) {
    ParamFrames frames;
    if (rows_) rows_->any = false;
    auto info = run_exchange(MessageType::kPull, {}, 0, &frames, nullptr);
    if (info) frames.copy_to(params, layout_);
    return info;
}

Result<StepInfo> PsClient::push(std::span<const float> grads, std::uint64_t step) {
    if (rows_) rows_->any = false;
    return run_exchange(MessageType::kPush, grads, step, nullptr, nullptr);
}

Result<StepInfo> PsClient::push_pull(std::span<const float> grads, std::uint64_t step, std::span<float> params) {
    ParamFrames frames;
    if (rows_) rows_->any = false;
    auto info = run_exchange(MessageType::kPushPull, grads, step, &frames, nullptr);
    if (info) frames.copy_to(params, layout_);
    return info;
}

Result<StepInfo> PsClient::push_pull_frames(std::span<const float> grads, std::uint64_t step, ParamFrames& out) {
    if (rows_) rows_->any = false;
    return run_exchange(MessageType::kPushPull, grads, step, &out, nullptr);
}

}  // namespace psrun
