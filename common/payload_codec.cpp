#include "common/payload_codec.h"

#include <cstring>

#include "common/wire.h"
#include "common/wire_precision.h"
#include "common/zmq_util.h"

namespace psrun {

std::string_view to_string(PayloadForm form) {
    switch (form) {
        case PayloadForm::kF32: return "f32";
        case PayloadForm::kBf16: return "bf16";
        case PayloadForm::kShm: return "shared memory";
    }
    return "unknown";
}

PayloadForm payload_form(std::uint32_t header_flags) {
    if (header_flags & wire::kFlagShm) return PayloadForm::kShm;
    if (header_flags & wire::kFlagBf16) return PayloadForm::kBf16;
    return PayloadForm::kF32;
}

std::uint32_t payload_flag(PayloadForm form) {
    switch (form) {
        case PayloadForm::kF32: return 0;
        case PayloadForm::kBf16: return wire::kFlagBf16;
        case PayloadForm::kShm: return wire::kFlagShm;
    }
    return 0;
}

std::size_t value_bytes(PayloadForm form) { return form == PayloadForm::kBf16 ? wire::kBf16Bytes : sizeof(float); }

zmq::message_t encode_frame(std::span<const float> values, PayloadForm form, std::uint16_t* staging,
                            std::atomic<int>& holds) {
    if (form != PayloadForm::kBf16) return zero_copy_message(values.data(), values.size_bytes(), holds);
    wire::f32_to_bf16(values, std::span<std::uint16_t>(staging, values.size()));
    return zero_copy_message(staging, values.size() * wire::kBf16Bytes, holds);
}

zmq::message_t encode_staged_bf16(std::span<const std::uint16_t> values, std::atomic<int>& holds) {
    return zero_copy_message(values.data(), values.size() * wire::kBf16Bytes, holds);
}

std::span<const float> decode_frame(const zmq::message_t& frame, std::size_t count, PayloadForm form, float* spare) {
    if (form == PayloadForm::kBf16) {
        wire::bf16_bytes_to_f32(frame.data(), std::span<float>(spare, count));
        return {spare, count};
    }
    const auto* p = static_cast<const float*>(frame.data());
    if (reinterpret_cast<std::uintptr_t>(p) % alignof(float) == 0) return {p, count};
    std::memcpy(spare, frame.data(), count * sizeof(float));
    return {spare, count};
}

}  // namespace psrun
