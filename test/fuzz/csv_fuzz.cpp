// libFuzzer target for CSV tables: the input is a CSV file read for a 2-feature class model
// (targets: a column named "label"), a 2-token model (vocabulary 50) and a regression model
// (target columns "label" and "y").
// Contract checked: never a crash; an accepted table's arrays have one row per example, labels
// and class names agree, every feature finite, every token id below the vocabulary.
// Built and run by test/fuzz/fuzz.sh csv.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "workerd/data/table_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::worker;
    const std::vector<std::uint8_t> bytes(data, data + size);
    ModelInput feats{"mlp", 1, 1, 1, 1000, InputKind::kFeatures, 2};
    ModelInput tokens{"tok", 1, 1, 1, 1000, InputKind::kTokens, 2, 50};
    ModelInput reg = feats;
    reg.target = TargetKind::kVector;
    reg.target_length = 2;
    for (const ModelInput& m : {feats, tokens, reg}) {
        const TableColumns columns{
            {}, m.target == TargetKind::kVector ? std::vector<std::string>{"label", "y"} : std::vector<std::string>{}};
        auto t = parse_table(bytes, "fuzz.csv", TableFormat::kCsv, columns, m);
        if (!t) continue;
        const LabeledImages& d = t->data;
        const std::size_t n = d.size();
        if (n == 0) __builtin_trap();
        if (d.target == TargetKind::kClass && d.labels.size() != n) __builtin_trap();
        if (d.target == TargetKind::kVector && d.targets.size() != n * d.target_length) __builtin_trap();
        if (!d.class_names.empty())
            for (auto l : d.labels)
                if (l < 0 || static_cast<std::size_t>(l) >= d.class_names.size()) __builtin_trap();
        for (float v : d.images.f32)
            if (!std::isfinite(v)) __builtin_trap();
        for (auto id : d.tokens)
            if (id < 0 || id >= 50) __builtin_trap();
        (void)check_fits_model(d, {"x", "y"}, m);
    }
    return 0;
}
