// libFuzzer target for the TFRecord framing and tf.train.Example decoding: the input is a
// TFRecord stream (first byte: bit 0 picks --corrupt-records error or skip); every record it
// yields is parsed as an Example for a few keys and described.
// Contract checked: never a crash; an accepted record's data CRC matched (re-framing it gives a
// record that parses back to the same bytes); parsed features hold values only of their kind.
// Built and run by test/fuzz/fuzz.sh tfrecord.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "workerd/data/example_proto.h"
#include "workerd/data/tfrecord_reader.h"
#include "workerd/data/tfrecord_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::worker;
    if (size == 0) return 0;
    const CorruptRecords policy = data[0] & 1 ? CorruptRecords::kSkip : CorruptRecords::kError;
    const std::vector<std::uint8_t> bytes(data + 1, data + size);
    auto records = parse_tfrecords(bytes, "fuzz-input", policy);
    if (!records) return 0;
    const std::vector<std::string> keys{"image/encoded", "image/class/label", "x", ""};
    for (const auto& r : *records) {
        auto again = parse_tfrecords(frame_tfrecord(r), "again", CorruptRecords::kError);
        if (!again || again->size() != 1 || (*again)[0] != r) __builtin_trap();
        std::vector<FeatureValues> values(keys.size());
        if (parse_example(r, keys, values)) {
            for (const auto& v : values) {
                const std::size_t others = (v.kind == FeatureKind::kBytes ? 0 : v.bytes.size()) +
                                           (v.kind == FeatureKind::kFloat ? 0 : v.floats.size()) +
                                           (v.kind == FeatureKind::kInt64 ? 0 : v.ints.size());
                if (others != 0) __builtin_trap();
                for (const auto& b : v.bytes)
                    if (b.data() < r.data() || b.data() + b.size() > r.data() + r.size()) __builtin_trap();
            }
        }
        (void)describe_example_keys(r);
    }
    return 0;
}
