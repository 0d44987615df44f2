// ParameterServer's payloads (common/payload_codec.h): the one place where psd turns the frames (or
// the sender's shared-memory region) of INIT, PUSH and PUSH_PULL into float spans, and its slices
// into the frames (or region) of PARAMS, in the form the request announced: shared memory
// (psd/parameter_server_shm.cpp), bf16 frames (psd/bf16_params.h keeps the converted copy) or f32
// frames. Sealing (--auth mac) happens after, in send_reply() (psd/parameter_server_replies.cpp).
#include <spdlog/spdlog.h>

#include <cstring>

#include "common/wire_precision.h"
#include "common/zmq_util.h"
#include "psd/parameter_server.h"

namespace psrun::psd {

using wire::FrameDesc;
using wire::Header;
using wire::MessageType;

Result<std::vector<std::span<const float>>> ParameterServer::decode_slices(const Header& h, Parts& parts,
                                                                           std::size_t first, PayloadForm form,
                                                                           const ShmSegment* segment) {
    if (form == PayloadForm::kShm) {
        auto spans = shm_slices(h, *segment);
        if (!spans) return spans;
        PSRUN_TRY(check_finite(*spans));
        return spans;
    }
    const auto& ids = shard_->slice_ids();
    if (wire::dense_frame_count(h) != first + ids.size())
        return make_error(ErrorCode::kProtocol, "expected " + std::to_string(ids.size()) + " slice frames");
    if (payload_spare_.size() != shard_->size()) payload_spare_.resize(shard_->size());
    std::vector<std::span<const float>> spans;
    for (std::size_t k = 0; k < ids.size(); ++k) {
        const auto& d = h.frames[first + k];
        const std::size_t length = shard_->layout().slices[ids[k]].length;
        const auto& frame = parts[2 + first + k];
        if (d.id != ids[k] || (form == PayloadForm::kF32 && d.bytes != length * sizeof(float)))
            return make_error(ErrorCode::kProtocol, "frame " + std::to_string(first + k) + " is not slice " +
                                                        std::to_string(ids[k]) + " of this shard");
        if (d.bytes != length * value_bytes(form))
            return make_error(ErrorCode::kProtocol, "bf16 gradient frame " + std::to_string(k) + " (slice " +
                                                        std::to_string(ids[k]) + ") has " +
                                                        std::to_string(frame.size()) + " bytes; its " +
                                                        std::to_string(length) + " values take exactly " +
                                                        std::to_string(length * value_bytes(form)) + " bytes in bf16");
        spans.push_back(decode_frame(frame, length, form, payload_spare_.data() + shard_->local_offset(k)));
    }
    PSRUN_TRY(check_finite(spans));
    return spans;
}

Result<RowFrames> ParameterServer::decode_rows(const Header& h, Parts& parts, std::size_t dense_end) {
    const auto descs = std::span<const FrameDesc>(h.frames).subspan(dense_end);
    const auto frames = std::span<const zmq::message_t>(parts).subspan(2 + dense_end);
    auto rows = parse_row_frames(shard_->layout(), tensors_, options_.index, h.type, payload_form(h.flags), descs,
                                 frames, row_id_spare_, row_key_spare_, row_value_spare_);
    if (!rows) return rows;
    if (h.flags & wire::kFlagLookup)
        for (auto& p : rows->pulls) p.lookup = true;
    for (const auto& g : rows->grads) {
        if (wire::all_finite(g.values.data(), g.values.size())) continue;
        ++counters_.nonfinite;
        return make_error(ErrorCode::kInvalidArgument, "gradient rows of sparse table '" +
                                                           tensors_.at(shard_->layout().tables[g.table].tensor).name +
                                                           "' contain NaN or Inf: rejected, weights untouched");
    }
    return rows;
}

std::vector<ParameterServer::PendingPull> ParameterServer::copy_pulls(const RowFrames& rows) {
    std::vector<PendingPull> out;
    for (const auto& p : rows.pulls)
        out.push_back(PendingPull{p.table, {p.ids.begin(), p.ids.end()}, {p.keys.begin(), p.keys.end()}, p.lookup});
    return out;
}

std::vector<RowSlice> ParameterServer::pull_slices(const std::vector<PendingPull>& pulls) {
    std::vector<RowSlice> out;
    for (const auto& p : pulls) out.push_back(RowSlice{p.table, p.ids, {}, p.keys, p.lookup});
    return out;
}

// The dense part in the request's form (shared memory, bf16 or f32 frames), then the pulled rows
// as values frames (f32, or bf16 under BF16), gathered into messages ZeroMQ owns: a table is never
// copied whole, and its rows may change as soon as the reply is queued.
void ParameterServer::reply_params(const std::string& routing, std::uint32_t flags, bool written,
                                   std::span<const RowSlice> pulls) {
    flags |= take_rejoined(routing);
    std::vector<FrameDesc> row_descs;
    std::vector<zmq::message_t> row_frames;
    const PayloadForm row_form = attachment(routing) ? PayloadForm::kF32 : payload_form(flags);
    std::vector<float> row;
    for (const auto& p : pulls) {
        const RowTable& table = shard_->layout().tables[p.table];
        const std::size_t values = p.size() * table.width;
        // Rows [first, first + n) of the request (a keyed table's by raw id) into `out`.
        auto gather = [&](std::size_t first, std::size_t n, float* out) {
            if (table.keyed) shard_->rows().gather(p.table, p.keys.subspan(first, n), out, p.lookup);
            else shard_->rows().gather(p.table, p.ids.subspan(first, n), out, p.lookup);
        };
        zmq::message_t frame(values * value_bytes(row_form));
        if (row_form == PayloadForm::kBf16) {
            row.resize(table.width);
            for (std::size_t i = 0; i < p.size(); ++i) {
                gather(i, 1, row.data());
                wire::f32_to_bf16_bytes(row, static_cast<char*>(frame.data()) + i * table.width * wire::kBf16Bytes);
            }
        } else if (reinterpret_cast<std::uintptr_t>(frame.data()) % alignof(float) == 0) {
            gather(0, p.size(), static_cast<float*>(frame.data()));
        } else {  // a small message's bytes inside the message object: gather, then copy
            row.resize(values);
            gather(0, p.size(), row.data());
            std::memcpy(frame.data(), row.data(), values * sizeof(float));
        }
        row_descs.push_back(FrameDesc{wire::row_frame_id(wire::RowPart::kValues, table.tensor),
                                      static_cast<std::uint32_t>(frame.size())});
        row_frames.push_back(std::move(frame));
        counters_.rows_pulled += p.size();
    }
    if (ShmSegment* segment = attachment(routing))
        return reply_params_shm(routing, flags & ~wire::kFlagBf16, *segment, written, std::move(row_descs),
                                std::move(row_frames));
    const PayloadForm form = payload_form(flags);
    Header h;
    h.type = MessageType::kParams;
    h.role = wire::Role::kPs;
    h.token = options_.token;
    h.index = options_.index;
    h.flags = flags;
    if (h.flags & wire::kFlagRejoined) h.aux = static_cast<std::uint64_t>(options_.worker_timeout.count());
    h.step = shard_->step();
    const auto& ids = shard_->slice_ids();
    std::vector<zmq::message_t> payloads;
    // bf16: one converted copy per parameter version, shared by every reply of that version.
    auto* bf16 = form == PayloadForm::kBf16 ? &bf16_.params(*shard_, team_.get()) : nullptr;
    auto& buffer = shard_->current();
    for (std::size_t k = 0; k < ids.size(); ++k) {
        const std::size_t length = shard_->layout().slices[ids[k]].length;
        h.frames.push_back(FrameDesc{ids[k], static_cast<std::uint32_t>(length * value_bytes(form))});
        if (bf16)
            payloads.push_back(encode_staged_bf16(
                std::span<const std::uint16_t>(bf16->data.data() + shard_->local_offset(k), length), bf16->holds));
        else
            payloads.push_back(
                encode_frame(std::span<const float>(buffer.data.data() + shard_->local_offset(k), length),
                             PayloadForm::kF32, nullptr, buffer.holds));
    }
    h.frames.insert(h.frames.end(), row_descs.begin(), row_descs.end());
    for (auto& f : row_frames) payloads.push_back(std::move(f));
    send_reply(routing, h, payloads);
}

}  // namespace psrun::psd
