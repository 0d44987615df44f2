// The frame codec both ends of the exchange share (common/payload_codec.h).
#include "common/payload_codec.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

#include "common/wire.h"
#include "common/wire_precision.h"
#include "common/zmq_util.h"

using namespace psrun;

TEST_CASE("payload forms follow the header flags", "[wire][payload]") {
    CHECK(payload_form(0) == PayloadForm::kF32);
    CHECK(payload_form(wire::kFlagBf16) == PayloadForm::kBf16);
    CHECK(payload_form(wire::kFlagShm | wire::kFlagBf16) == PayloadForm::kShm);
    for (auto form : {PayloadForm::kF32, PayloadForm::kBf16, PayloadForm::kShm})
        CHECK(payload_form(payload_flag(form)) == form);
    CHECK(value_bytes(PayloadForm::kF32) == 4);
    CHECK(value_bytes(PayloadForm::kBf16) == 2);
}

TEST_CASE("frames round trip in f32 (zero copy, in place) and bf16 (rounded, expanded)", "[wire][payload]") {
    std::vector<float> values = {1.0f, -2.5f, 3.14159f, 1e-30f, std::numeric_limits<float>::infinity(), 65504.5f};
    std::atomic<int> holds{0};
    {
        zmq::message_t f32 = encode_frame(values, PayloadForm::kF32, nullptr, holds);
        CHECK(holds.load() == 1);
        CHECK(f32.data() == values.data());  // zero copy
        std::vector<float> spare(values.size());
        const auto back = decode_frame(f32, values.size(), PayloadForm::kF32, spare.data());
        CHECK(back.data() == values.data());  // aligned: used in place
        CHECK(std::equal(back.begin(), back.end(), values.begin()));

        std::vector<std::uint16_t> staging(values.size());
        zmq::message_t bf16 = encode_frame(values, PayloadForm::kBf16, staging.data(), holds);
        CHECK(bf16.size() == 2 * values.size());
        CHECK(bf16.data() == staging.data());
        const auto expanded = decode_frame(bf16, values.size(), PayloadForm::kBf16, spare.data());
        CHECK(expanded.data() == spare.data());
        for (std::size_t i = 0; i < values.size(); ++i) CHECK(expanded[i] == wire::to_f32(wire::to_bf16(values[i])));
        CHECK(expanded[0] == 1.0f);
        CHECK(expanded[1] == -2.5f);
    }
    wait_released(holds);
    CHECK(holds.load() == 0);
}

TEST_CASE("a misaligned f32 frame is copied into the spare buffer", "[wire][payload]") {
    const std::vector<float> values = {0.5f, -0.25f, 7.0f};
    std::string bytes(1 + sizeof(float) * values.size(), '\0');
    std::memcpy(bytes.data() + 1, values.data(), sizeof(float) * values.size());
    // A frame whose data starts one byte into an allocation: misaligned for float.
    std::atomic<int> holds{0};
    zmq::message_t frame = zero_copy_message(bytes.data() + 1, sizeof(float) * values.size(), holds);
    std::vector<float> spare(values.size());
    const auto back = decode_frame(frame, values.size(), PayloadForm::kF32, spare.data());
    CHECK(back.data() == spare.data());
    CHECK(std::equal(back.begin(), back.end(), values.begin()));
}
