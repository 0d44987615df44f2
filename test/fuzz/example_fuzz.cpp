// libFuzzer target for tf.train.Example decoding on its own (the input is one serialized
// Example), through the ExampleDecoder a stream uses: features as an image model's encoded
// image (bytes), as 4 float features, and as 4 token ids of a vocabulary of 100, each with a
// class label or a target vector of 5 (multi-hot or floats).
// Contract checked: never a crash; decoded labels in range, token ids below the vocabulary,
// features and targets finite.
// Built and run by test/fuzz/fuzz.sh example.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "workerd/data/example_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::worker;
    const std::span<const std::uint8_t> record(data, size);
    ModelInput image{"img", 1, 8, 8, 10};
    ModelInput feats{"mlp", 1, 1, 1, 10, InputKind::kFeatures, 4};
    ModelInput tokens{"tok", 1, 1, 1, 10, InputKind::kTokens, 4, 100};
    ModelInput multi = feats;
    multi.target = TargetKind::kVector;
    multi.target_length = 5;
    struct Case {
        ModelInput model;
        PixelType pixels;
        RecordKeys keys;
    };
    const Case cases[] = {{image, PixelType::kUint8, {}},
                          {feats, PixelType::kFloat32, {{"x"}, {"y"}}},
                          {tokens, PixelType::kFloat32, {{"x"}, {"y"}}},
                          {multi, PixelType::kFloat32, {{"x", "z"}, {"y"}}}};
    for (const Case& c : cases) {
        (void)probe_example_layout(record, c.keys, c.model, "fuzz-input");
        ExampleDecoder decoder({c.model, c.pixels}, c.keys, ResizeMode::kCrop);
        LabeledImages out = make_examples({c.model, c.pixels}, 1);
        if (!decoder.decode_example(record, out, 0, "fuzz-input")) continue;
        if (c.model.target == TargetKind::kClass && (out.labels[0] < 0 || out.labels[0] >= c.model.classes))
            __builtin_trap();
        for (float t : out.targets)
            if (!std::isfinite(t)) __builtin_trap();
        for (std::int32_t t : out.tokens)
            if (t < 0 || t >= 100) __builtin_trap();
        for (float v : out.images.f32)
            if (!std::isfinite(v)) __builtin_trap();
    }
    return 0;
}
