// libFuzzer target for the data dispenser's state in a checkpoint (psd/data_chunks_file.h,
// <ckpt>/data-chunks.tensors). The first byte picks the input's form:
//   even  the rest is the whole file (the tensor file's framing and CRCs first);
//   odd   the rest is 16-bit digits (little-endian byte pairs) laid into the three tensors of a
//         well-formed file with correct CRCs (byte 1: complete epochs % 4, byte 2: open epochs % 4),
//         so the digit decoding and DataChunks::restore()'s checks are reached past the CRCs.
// Contract checked: never a crash; an accepted state is one DataChunks::restore() accepts and whose
// state() is the same; it re-encodes to a file that decodes to the same state again; a restored
// dispenser leases a chunk inside the plan's examples; the parsed tensors handed straight to
// decode_data_chunks_tensors() (what psd/shard_state_file.cpp does with the tensors that end a
// standby shard file) are accepted or refused alike, to the same state, and data_chunks_tensors()
// of an accepted state are those tensors again.
// Built and run by test/fuzz/fuzz.sh data_chunks.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/tensor_file.h"
#include "psd/data_chunks_file.h"

namespace {

std::string well_formed(const std::uint8_t* data, std::size_t size) {
    using psrun::TensorView;
    if (size < 2) return {};
    const std::uint64_t closed_rows = data[0] % 4, open_rows = data[1] % 4;
    std::vector<float> digits;
    for (std::size_t i = 2; i + 1 < size; i += 2) digits.push_back(static_cast<float>(data[i] | (data[i + 1] << 8)));
    std::size_t at = 0;
    auto take = [&](std::size_t n) {
        std::vector<float> out(n, 0.0f);
        for (auto& f : out)
            if (at < digits.size()) f = digits[at++];
        return out;
    };
    const std::vector<float> header = take(36);
    const std::uint64_t chunks = static_cast<std::uint64_t>(header[8]) | (static_cast<std::uint64_t>(header[9]) << 16);
    const std::uint64_t width = 4 + (chunks >= 1 && chunks <= 256 ? (chunks + 15) / 16 : 1);
    const std::vector<float> closed = take(closed_rows * 12), open = take(open_rows * width);
    const TensorView views[] = {{"data_chunks/header", {9, 4}, header},
                                {"data_chunks/closed", {closed_rows, 12}, closed},
                                {"data_chunks/open", {open_rows, width}, open}};
    return psrun::encode_tensor_file(views);
}

bool same_tensors(const std::vector<psrun::NamedTensor>& a, const std::vector<psrun::NamedTensor>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].name != b[i].name || a[i].shape != b[i].shape || a[i].data != b[i].data) return false;
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::psd;
    if (size == 0) return 0;
    const std::string built = data[0] % 2 ? well_formed(data + 1, size - 1) : std::string();
    const std::string_view bytes =
        data[0] % 2 ? std::string_view(built) : std::string_view(reinterpret_cast<const char*>(data + 1), size - 1);
    const auto state = decode_data_chunks(bytes, "fuzz-input");
    if (auto tensors = psrun::parse_tensor_file(bytes, "fuzz-input")) {
        const auto direct = decode_data_chunks_tensors(*tensors, "fuzz-input");
        if (direct.has_value() != state.has_value() || (direct && !(*direct == *state))) __builtin_trap();
        if (direct && !same_tensors(data_chunks_tensors(*direct), *tensors)) __builtin_trap();
    }
    if (!state) return 0;
    auto restored = DataChunks::restore(*state);
    if (!restored || !(restored->state() == *state)) __builtin_trap();
    const auto again = decode_data_chunks(encode_data_chunks(*state), "fuzz-input");
    if (!again || !(*again == *state)) __builtin_trap();
    const ChunkLease lease = restored->lease(0);
    if (lease.count == 0 || lease.first + lease.count > state->plan.examples) __builtin_trap();
    return 0;
}
