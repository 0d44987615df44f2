#include "common/event_writer.h"

#include <unistd.h>

#include <cstring>
#include <ctime>
#include <stdexcept>

#include "common/tfrecord.h"

namespace psrun {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void put_varint(std::string& out, std::uint64_t v) {
    while (v >= 0x80) {
        out.push_back(static_cast<char>((v & 0x7f) | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, int field, int wire_type) {
    put_varint(out, static_cast<std::uint64_t>(field << 3 | wire_type));
}

template <class T>
void put_fixed(std::string& out, int field, T value) {
    put_key(out, field, sizeof(T) == 8 ? kFixed64 : kFixed32);
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));  // x86-64 is little-endian, as protobuf is
    out.append(bytes, sizeof(T));
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
    put_key(out, field, kLengthDelimited);
    put_varint(out, bytes.size());
    out.append(bytes);
}

struct Field {
    int number = 0;
    int wire_type = 0;
    std::uint64_t integer = 0;  // varint, fixed32 and fixed64 payloads
    std::string_view bytes;     // length-delimited payloads
};

// Reads the next field of a message; false at the end or on malformed input (ok=false).
bool next_field(std::string_view& in, Field& f, bool& ok) {
    ok = true;
    if (in.empty()) return false;
    auto varint = [&](std::uint64_t& v) {
        v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (in.empty()) return false;
            const auto byte = static_cast<std::uint8_t>(in.front());
            in.remove_prefix(1);
            v |= std::uint64_t(byte & 0x7f) << shift;
            if (!(byte & 0x80)) return true;
        }
        return false;
    };
    std::uint64_t key;
    if (!varint(key)) return ok = false;
    f.number = static_cast<int>(key >> 3);
    f.wire_type = static_cast<int>(key & 7);
    switch (f.wire_type) {
        case kVarint: return ok = varint(f.integer);
        case kFixed64:
        case kFixed32: {
            const std::size_t n = f.wire_type == kFixed64 ? 8 : 4;
            if (in.size() < n) return ok = false;
            f.integer = 0;
            std::memcpy(&f.integer, in.data(), n);
            in.remove_prefix(n);
            return true;
        }
        case kLengthDelimited: {
            std::uint64_t n;
            if (!varint(n) || n > in.size()) return ok = false;
            f.bytes = in.substr(0, n);
            in.remove_prefix(n);
            return true;
        }
        default: return ok = false;
    }
}

}  // namespace

std::string encode_scalar_event(std::string_view tag, std::int64_t step, float value, double wall_time) {
    std::string summary_value;
    put_bytes(summary_value, 1, tag);
    put_fixed(summary_value, 2, value);
    std::string summary;
    put_bytes(summary, 1, summary_value);
    std::string event;
    put_fixed(event, 1, wall_time);
    put_key(event, 2, kVarint);
    put_varint(event, static_cast<std::uint64_t>(step));
    put_bytes(event, 5, summary);
    return event;
}

Result<ScalarEvent> decode_scalar_event(std::string_view event) {
    ScalarEvent out;
    bool has_value = false, ok = true;
    Field f;
    while (next_field(event, f, ok)) {
        if (f.number == 1 && f.wire_type == kFixed64) std::memcpy(&out.wall_time, &f.integer, 8);
        if (f.number == 2 && f.wire_type == kVarint) out.step = static_cast<std::int64_t>(f.integer);
        if (f.number != 5 || f.wire_type != kLengthDelimited) continue;
        std::string_view summary = f.bytes;
        Field v;
        while (next_field(summary, v, ok)) {
            if (v.number != 1 || v.wire_type != kLengthDelimited) continue;
            std::string_view value = v.bytes;
            Field g;
            while (next_field(value, g, ok)) {
                if (g.number == 1 && g.wire_type == kLengthDelimited) out.tag = std::string(g.bytes);
                if (g.number == 2 && g.wire_type == kFixed32) {
                    const auto bits = static_cast<std::uint32_t>(g.integer);
                    std::memcpy(&out.value, &bits, 4);
                    has_value = true;
                }
            }
        }
    }
    if (!ok) return make_error(ErrorCode::kInvalidArgument, "malformed Event protobuf");
    if (!has_value) return make_error(ErrorCode::kNotFound, "event holds no scalar summary");
    return out;
}

EventWriter::EventWriter(const std::string& dir, const std::string& host) {
    path_ = dir + "/events.out.tfevents." + std::to_string(std::time(nullptr)) + "." + host + "." +
            std::to_string(::getpid());
    file_ = std::fopen(path_.c_str(), "wb");
    if (file_ == nullptr) throw std::runtime_error("cannot create event file " + path_);
    std::string event;
    put_fixed(event, 1, static_cast<double>(std::time(nullptr)));
    put_bytes(event, 3, "brain.Event:2");
    write_event(event);
    flush();
}

EventWriter::~EventWriter() {
    if (file_ != nullptr) std::fclose(file_);
}

void EventWriter::add_scalar(std::string_view tag, std::int64_t step, float value, double wall_time) {
    write_event(encode_scalar_event(tag, step, value, wall_time));
}

void EventWriter::write_event(const std::string& event) {
    std::string record;
    append_tfrecord(record, event);
    if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
        throw std::runtime_error("cannot write event file " + path_);
}

void EventWriter::flush() { std::fflush(file_); }

}  // namespace psrun
