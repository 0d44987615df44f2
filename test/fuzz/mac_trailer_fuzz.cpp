// libFuzzer target for --auth mac (common/message_auth.h): arbitrary bytes as a message's frames
// and trailer go to MessageVerifier::verify, which must refuse them (a forged message never
// verifies) without crashing; a trailer that decodes must encode back to its bytes. Input: the
// first byte gives the frame count (0-7), the last kTrailerSize bytes (or fewer) are the trailer,
// the bytes between are split evenly into the frames. Built with libcrypto's GMAC (no ipsec-mb).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/message_auth.h"

namespace {

psrun::JobKeys fixed_keys() {
    psrun::JobKeys k;
    k.token = 0x1234;
    k.server_public = k.server_secret = std::string(40, 'a');
    k.client_public = k.client_secret = std::string(40, 'b');
    return k;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    static psrun::MessageVerifier verifier(fixed_keys(), 0, std::chrono::seconds(300));
    const std::size_t frame_count = data[0] % 8;
    const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    const std::size_t trailer_size = std::min(rest.size(), psrun::kTrailerSize);
    const std::string_view trailer = rest.substr(rest.size() - trailer_size);
    const std::string_view body = rest.substr(0, rest.size() - trailer_size);
    std::vector<psrun::ByteRange> frames;
    const std::size_t each = frame_count ? body.size() / frame_count : 0;
    for (std::size_t i = 0; i < frame_count; ++i)
        frames.push_back(psrun::ByteRange{body.data() + i * each, i + 1 < frame_count ? each : body.size() - i * each});
    if (verifier.verify("fuzz", frames, trailer)) __builtin_trap();  // a forgery verified
    if (verifier.can_seal("fuzz")) __builtin_trap();                 // a refused request binds no reply
    auto decoded = psrun::decode_trailer(trailer);
    if (decoded && psrun::encode_trailer(*decoded) != trailer) __builtin_trap();  // decoding is exact
    return 0;
}
