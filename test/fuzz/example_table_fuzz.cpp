// libFuzzer target for recommender Examples (workerd/data/example_table.h): the input is a
// sequence of serialized tf.train.Example records, each preceded by its length as two bytes
// (little-endian; a length past the end takes the rest), read for a click model (dense [2]
// float, cat [2] ids of 50 rows, tags [3] ids of 20 rows, tags_w [3] float; target "label",
// one float) by the spec dense=D cat=C1,C2 tags=T, --bag-weights tags_w=tags:mean. Contract
// checked: never a crash; an accepted file has one row per record, every input rows x width
// values, ids within their table, every float finite, mean weights in [0, 1] summing to at
// most 1 per bag. Built and run by test/fuzz/fuzz.sh example_table.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "test/fuzz/click_table_inputs.h"
#include "workerd/data/example_table.h"

using namespace psrun::worker;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::vector<std::vector<std::uint8_t>> records;
    for (std::size_t at = 0; at < size;) {
        std::size_t n = data[at];
        if (at + 1 < size) n |= static_cast<std::size_t>(data[at + 1]) << 8;
        at += 2;
        if (at > size) at = size;
        n = std::min(n, size - at);
        records.emplace_back(data + at, data + at + n);
        at += n;
    }
    const std::vector<TableInput> inputs = click_table_inputs();
    const ModelInput model = click_table_model();
    auto spec = parse_column_spec({"dense=D", "cat=C1,C2", "tags=T"}, {"tags_w=tags:mean"}, "");
    if (!spec) __builtin_trap();
    auto t = parse_example_table(records, "fuzz.tfrecord", *spec, inputs, {}, model);
    if (!t) return 0;
    const LabeledImages& d = t->data;
    const std::size_t n = d.size();
    if (n != records.size() || d.images.f32.size() != n * 2 || d.targets.size() != n || d.columns.size() != 3)
        __builtin_trap();
    for (float v : d.images.f32)
        if (!std::isfinite(v)) __builtin_trap();
    for (float v : d.targets)
        if (!std::isfinite(v)) __builtin_trap();
    for (std::size_t k = 0; k < 3; ++k) {
        const InputColumn& c = d.columns[k];
        const TableInput& in = inputs[k + 1];
        if ((in.ints ? c.i32.size() : c.f32.size()) != n * in.width) __builtin_trap();
        for (auto id : c.i32)
            if (id < 0 || id >= in.rows) __builtin_trap();
        for (float w : c.f32)
            if (!std::isfinite(w) || w < 0 || w > 1) __builtin_trap();
    }
    for (std::size_t e = 0; e < n; ++e) {
        float sum = 0;
        for (std::size_t s = 0; s < 3; ++s) sum += d.columns[2].f32[e * 3 + s];
        if (sum > 1.0001f) __builtin_trap();
    }
    return 0;
}
