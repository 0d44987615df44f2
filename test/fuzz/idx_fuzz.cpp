// libFuzzer target for the MNIST IDX reader: raw or gzip bytes through maybe_inflate (the
// in-memory half of read_maybe_gzip), then the images or labels parser. The first byte picks
// the parser; the rest is the file.
// Contract checked: never a crash; accepted images hold exactly count*rows*cols pixels and
// accepted labels are all below kNumClasses.
// Built and run by test/fuzz/fuzz.sh idx.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "workerd/data/idx_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::worker;
    if (size == 0) return 0;
    auto bytes = maybe_inflate(std::vector<std::uint8_t>(data + 1, data + size), "fuzz-input");
    if (!bytes) return 0;
    if (data[0] % 2 == 0) {
        const auto images = parse_idx_images(*bytes, "fuzz-input");
        if (images && (images->count == 0 || images->rows <= 0 || images->cols <= 0 ||
                       images->pixels.size() != images->count * static_cast<std::size_t>(images->rows) *
                                                    static_cast<std::size_t>(images->cols)))
            __builtin_trap();
    } else {
        const auto labels = parse_idx_labels(*bytes, "fuzz-input");
        if (labels) {
            if (labels->labels.empty()) __builtin_trap();
            for (std::uint8_t l : labels->labels)
                if (l >= kNumClasses) __builtin_trap();
        }
    }
    return 0;
}
