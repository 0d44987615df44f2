// libFuzzer target for what a restore reads from a model directory: tensor files (CRC32C per
// tensor) and manifest.json. The first byte picks the parser; the rest is the file.
// Contract checked: never a crash; an accepted tensor file re-encodes to exactly its bytes and
// every tensor's shape product equals its element count; an accepted manifest is an object
// whose "files" are plain names; a differential piece's block list or base (common/row_delta.h) in
// an accepted file decodes to ascending rows within its piece, or is refused.
// Built and run by test/fuzz/fuzz.sh checkpoint.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/checkpoint_store.h"
#include "common/row_delta.h"
#include "common/tensor_file.h"

namespace {

bool shape_matches(const psrun::NamedTensor& t) {
    unsigned __int128 product = 1;
    for (std::uint64_t d : t.shape) {
        product *= d;
        if (product > static_cast<unsigned __int128>(1) << 64) return false;
    }
    return product == t.data.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun;
    if (size == 0) return 0;
    const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
    if (data[0] % 2 == 0) {
        const auto tensors = parse_tensor_file(bytes, "fuzz-input");
        if (!tensors) return 0;
        std::vector<TensorView> views;
        for (const auto& t : *tensors) {
            if (!shape_matches(t)) __builtin_trap();
            views.push_back(TensorView{t.name, t.shape, t.data});
            if (t.name.ends_with("/base")) (void)decode_row_delta_base(t.data, "fuzz-input");
            if (t.name.ends_with("/rows")) (void)decode_row_count(t.data, "fuzz-input");
            if (!t.name.ends_with("/blocks")) continue;
            constexpr std::uint64_t kSourceRows = 100000;  // the piece's rows, as its base would give them
            const auto rows = decode_row_delta_rows(t.data, kSourceRows, "fuzz-input");
            if (!rows) continue;
            if (rows->size() > t.data.size() / 2 * kRowDeltaBlockRows) __builtin_trap();
            for (std::size_t i = 0; i < rows->size(); ++i)
                if ((*rows)[i] >= kSourceRows || (i > 0 && (*rows)[i] <= (*rows)[i - 1])) __builtin_trap();
        }
        if (encode_tensor_file(views) != bytes) __builtin_trap();
    } else {
        const auto manifest = CheckpointStore::parse_manifest(bytes, "fuzz-input/manifest.json");
        if (!manifest) return 0;
        if (!manifest->is_object() || !manifest->at("files").is_array()) __builtin_trap();
        for (const auto& f : manifest->at("files")) {
            const std::string name = f.get<std::string>();
            if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) __builtin_trap();
        }
    }
    return 0;
}
