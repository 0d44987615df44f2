// Turning one record into one example of a model's input and target: an image file (with the
// label its folder gives), or a tf.train.Example whose features are chosen by name (--inputs,
// --targets). How Example features map onto the model (docs/data.md "TFRecord"):
//   input  bytes_list, 1 value        an encoded JPEG/PNG/PGM image (image models)
//          float_list / int64_list    the values themselves, the keys' values concatenated:
//                                     C*H*W pixels, F features, or L token ids (int64_list)
//   target int64_list, 1 value        a class label (class models)
//          int64_list, k values       class indices of a multi-hot vector (vector models)
//          float_list                 the target vector itself (vector models)
// Examples are stored as LabeledImages: images decoded from files as uint8 (4x less memory),
// values from float and int64 lists as float32. An ExampleDecoder is not thread-safe (one per
// decoding thread); the free functions are.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/example_proto.h"
#include "workerd/data/image_decoder.h"
#include "workerd/data/labeled_images.h"

namespace psrun::worker {

// The Example feature keys of the inputs and targets.
struct RecordKeys {
    std::vector<std::string> inputs{"image/encoded"};
    std::vector<std::string> targets{"image/class/label"};
};

// How examples of `model` are stored: pixels as uint8 (encoded images) or float32 (lists).
struct ExampleLayout {
    ModelInput model;
    PixelType pixels = PixelType::kUint8;
};

// An empty set of examples with `layout`'s shape and kinds, room for `count` (zeroed).
LabeledImages make_examples(const ExampleLayout& layout, std::size_t count);
// Copies example i of `from` to slot j of `to` (same layout).
void copy_example(const LabeledImages& from, std::size_t i, LabeledImages& to, std::size_t j);

// From the first record of a TFRecord set: checks that the keys exist with usable kinds for the
// model and returns the layout. Errors (kInvalidArgument, prefixed by `what`): a missing key
// (listing the keys the record has and the option to give), a kind the model cannot take.
[[nodiscard]] Result<ExampleLayout> probe_example_layout(std::span<const std::uint8_t> record, const RecordKeys& keys,
                                                         const ModelInput& model, const std::string& what);

class ExampleDecoder {
  public:
    ExampleDecoder(ExampleLayout layout, RecordKeys keys, ResizeMode resize);

    // An image file's bytes with its folder's label into slot j of `to`.
    [[nodiscard]] Result<void> decode_image(std::span<const std::uint8_t> bytes, std::int32_t label, LabeledImages& to,
                                            std::size_t j, const std::string& what);
    // A serialized tf.train.Example into slot j of `to`. Errors name `what` (the file and record).
    [[nodiscard]] Result<void> decode_example(std::span<const std::uint8_t> record, LabeledImages& to, std::size_t j,
                                              const std::string& what);
    const ExampleLayout& layout() const { return layout_; }

  private:
    Result<void> decode_input(std::span<const std::uint8_t> record, LabeledImages& to, std::size_t j,
                              const std::string& what);
    Result<void> decode_target(std::span<const std::uint8_t> record, LabeledImages& to, std::size_t j,
                               const std::string& what);

    ExampleLayout layout_;
    RecordKeys keys_;
    ImageTarget target_;
    ImageDecoder images_;
    std::vector<std::string> all_keys_;  // parse_example's list: the input keys, then the target keys
    std::size_t n_inputs_ = 0;
    std::vector<FeatureValues> values_;  // per key of all_keys_
};

}  // namespace psrun::worker
