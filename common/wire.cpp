#include "common/wire.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/coding.h"

namespace psrun::wire {
namespace {

std::uint32_t crc_of(std::string_view bytes) {
    return static_cast<std::uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

constexpr std::size_t kCrcOffset = 44;

}  // namespace

std::string_view to_string(MessageType type) {
    switch (type) {
        case MessageType::kHello: return "HELLO";
        case MessageType::kWelcome: return "WELCOME";
        case MessageType::kInit: return "INIT";
        case MessageType::kPull: return "PULL";
        case MessageType::kPush: return "PUSH";
        case MessageType::kPushPull: return "PUSH_PULL";
        case MessageType::kParams: return "PARAMS";
        case MessageType::kAck: return "ACK";
        case MessageType::kDone: return "DONE";
        case MessageType::kStats: return "STATS";
        case MessageType::kStop: return "STOP";
        case MessageType::kError: return "ERROR";
        case MessageType::kHeartbeat: return "HEARTBEAT";
        case MessageType::kSave: return "SAVE";
        case MessageType::kRestore: return "RESTORE";
        case MessageType::kAttach: return "ATTACH";
        case MessageType::kDirCheck: return "DIRCHECK";
        case MessageType::kChunk: return "CHUNK";
        case MessageType::kJoin: return "JOIN";
    }
    return "UNKNOWN";
}

std::string encode_header(const Header& h) {
    std::string out;
    out.reserve(kFixedHeaderSize + kFrameDescriptorSize * h.frames.size());
    put_fixed32(out, kMagic);
    put_fixed16(out, kVersion);
    put_fixed8(out, static_cast<std::uint8_t>(h.type));
    put_fixed8(out, static_cast<std::uint8_t>(h.role));
    put_fixed64(out, h.token);
    put_fixed32(out, h.index);
    put_fixed32(out, h.flags);
    put_fixed64(out, h.step);
    put_fixed64(out, h.aux);
    put_fixed32(out, static_cast<std::uint32_t>(h.frames.size()));
    put_fixed32(out, 0);  // CRC placeholder
    for (const auto& f : h.frames) {
        put_fixed32(out, f.id);
        put_fixed32(out, f.bytes);
    }
    const std::uint32_t crc =
        crc_of(std::string_view(out).substr(0, kCrcOffset)) ^ crc_of(std::string_view(out).substr(kFixedHeaderSize));
    std::memcpy(out.data() + kCrcOffset, &crc, 4);
    return out;
}

Result<Header> decode_header(std::string_view bytes) {
    if (bytes.size() < kFixedHeaderSize)
        return protocol_error("header frame has " + std::to_string(bytes.size()) + " bytes, expected at least 48");
    Decoder d(bytes);
    std::uint32_t magic = 0, count = 0, crc = 0;
    std::uint16_t version = 0;
    std::uint8_t type = 0, role = 0;
    Header h;
    d.get32(magic);
    d.get16(version);
    d.get8(type);
    d.get8(role);
    d.get64(h.token);
    d.get32(h.index);
    d.get32(h.flags);
    d.get64(h.step);
    d.get64(h.aux);
    d.get32(count);
    d.get32(crc);
    if (magic != kMagic) return protocol_error("bad magic: not a psrun message");
    if (version != kVersion)
        return protocol_error("protocol version " + std::to_string(version) + ", this build speaks " +
                              std::to_string(kVersion) + ": run the same psrun build everywhere");
    if (type == 0 || type > kMaxMessageType) return protocol_error("unknown message type " + std::to_string(type));
    if (role > kMaxRole) return protocol_error("unknown sender role " + std::to_string(role));
    if ((h.flags & ~kKnownFlags) != 0) return protocol_error("unknown header flags");
    const bool shm_push = (h.flags & kFlagShm) && (type == static_cast<std::uint8_t>(MessageType::kPush) ||
                                                   type == static_cast<std::uint8_t>(MessageType::kPushPull));
    const bool rejoined = (h.flags & kFlagRejoined) && role == static_cast<std::uint8_t>(Role::kPs);
    if (shm_push ? h.aux > kMaxShmRegion : (h.aux != 0 && !rejoined))
        return protocol_error(shm_push ? "shared-memory gradient region out of range"
                                       : "header field 'aux' is not zero");
    if (count > kMaxFrames) return protocol_error("too many payload frames: " + std::to_string(count));
    if (bytes.size() != kFixedHeaderSize + kFrameDescriptorSize * count)
        return protocol_error("header frame size does not match its frame count");
    const std::uint32_t want = crc_of(bytes.substr(0, kCrcOffset)) ^ crc_of(bytes.substr(kFixedHeaderSize));
    if (crc != want) return protocol_error("header checksum mismatch");
    h.type = static_cast<MessageType>(type);
    h.role = static_cast<Role>(role);
    h.frames.resize(count);
    for (auto& f : h.frames) {
        d.get32(f.id);
        d.get32(f.bytes);
        if (f.id == kBodyFrame && f.bytes > kMaxBodyBytes) return protocol_error("body frame too large");
        if (is_row_frame(f.id) &&
            ((f.id & 0x7F000000u) != 0 || row_part(f.id) > RowPart::kValues || row_tensor(f.id) >= kMaxTensors))
            return protocol_error("bad row frame id " + std::to_string(f.id));
        if ((h.flags & kFlagShm) && !is_row_frame(f.id))
            return protocol_error("a shared-memory message carries no slice or body frames (row frames only)");
    }
    if (!d.ok()) return protocol_error("truncated header");
    return h;
}

std::size_t dense_frame_count(const Header& header) {
    std::size_t n = 0;
    while (n < header.frames.size() && !is_row_frame(header.frames[n].id)) ++n;
    return n;
}

Result<void> check_frames(const Header& header, std::span<const std::size_t> frame_sizes) {
    if (frame_sizes.size() != header.frames.size())
        return protocol_error("header announces " + std::to_string(header.frames.size()) + " payload frames, got " +
                              std::to_string(frame_sizes.size()));
    for (std::size_t i = 0; i < frame_sizes.size(); ++i)
        if (frame_sizes[i] != header.frames[i].bytes)
            return protocol_error("payload frame " + std::to_string(i) + " has " + std::to_string(frame_sizes[i]) +
                                  " bytes, header says " + std::to_string(header.frames[i].bytes));
    return {};
}

}  // namespace psrun::wire
