// libFuzzer target for .npz archives (zip, zip64, stored and deflated members) and the .npy
// members in them: the input is an archive read for a 3-feature class model (arrays "x", "y")
// and a regression model of 2 targets.
// Contract checked: never a crash or an allocation beyond the archive's own limits; an
// accepted table has one label (or target row) per example and finite features.
// Built and run by test/fuzz/fuzz.sh npz.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "workerd/data/npz_reader.h"
#include "workerd/data/table_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::worker;
    const std::vector<std::uint8_t> bytes(data, data + size);
    if (auto members = list_npz(bytes, "fuzz.npz"))
        for (const auto& m : *members)
            if (m.size < (1u << 24)) (void)read_npz_member(bytes, *members, m.name, "fuzz.npz");
    ModelInput feats{"mlp", 1, 1, 1, 10, InputKind::kFeatures, 3};
    ModelInput reg = feats;
    reg.target = TargetKind::kVector;
    reg.target_length = 2;
    for (const ModelInput& m : {feats, reg}) {
        auto t = parse_table(bytes, "fuzz.npz", TableFormat::kNpz, {}, m);
        if (!t) continue;
        const LabeledImages& d = t->data;
        if (d.target == TargetKind::kClass && d.labels.size() != d.size()) {
            (void)check_fits_model(d, {"x", "y"}, m);  // must report the mismatch, not crash
        }
        for (float v : d.images.f32)
            if (!std::isfinite(v)) __builtin_trap();
    }
    return 0;
}
