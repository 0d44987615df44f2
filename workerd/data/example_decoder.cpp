#include "workerd/data/example_decoder.h"

#include <algorithm>
#include <cmath>

namespace psrun::worker {
namespace {

tl::unexpected<Error> bad(const std::string& what, const std::string& problem) {
    return make_error(ErrorCode::kInvalidArgument, what + ": " + problem);
}

std::string join_keys(const std::vector<std::string>& keys) {
    std::string s;
    for (const auto& k : keys) s += (s.empty() ? "" : ",") + k;
    return s;
}

std::size_t input_values(const ModelInput& m) { return static_cast<std::size_t>(m.input_size()); }

}  // namespace

LabeledImages make_examples(const ExampleLayout& layout, std::size_t count) {
    const ModelInput& m = layout.model;
    LabeledImages d;
    d.input = m.input;
    if (m.input == InputKind::kTokens) {
        d.token_length = static_cast<std::size_t>(m.length);
        d.tokens.assign(count * d.token_length, 0);
    } else {
        ImageArray& a = d.images;
        a.count = count;
        a.type = layout.pixels;
        if (m.input == InputKind::kImage) {
            a.channels = m.channels;
            a.height = m.height;
            a.width = m.width;
        } else {
            a.channels = 1;
            a.height = 1;
            a.width = static_cast<int>(m.length);
        }
        if (a.type == PixelType::kUint8) a.u8.assign(count * a.example_size(), 0);
        else a.f32.assign(count * a.example_size(), 0.0f);
    }
    d.target = m.target;
    if (m.target == TargetKind::kClass) {
        d.labels.assign(count, 0);
    } else {
        d.target_length = static_cast<std::size_t>(m.target_length);
        d.targets.assign(count * d.target_length, 0.0f);
    }
    return d;
}

void copy_example(const LabeledImages& from, std::size_t i, LabeledImages& to, std::size_t j) {
    if (from.input == InputKind::kTokens) {
        const std::size_t l = from.token_length;
        std::copy_n(from.tokens.begin() + static_cast<std::ptrdiff_t>(i * l), l,
                    to.tokens.begin() + static_cast<std::ptrdiff_t>(j * l));
    } else {
        const std::size_t n = from.images.example_size();
        if (from.images.type == PixelType::kUint8)
            std::copy_n(from.images.u8.begin() + static_cast<std::ptrdiff_t>(i * n), n,
                        to.images.u8.begin() + static_cast<std::ptrdiff_t>(j * n));
        else
            std::copy_n(from.images.f32.begin() + static_cast<std::ptrdiff_t>(i * n), n,
                        to.images.f32.begin() + static_cast<std::ptrdiff_t>(j * n));
    }
    if (from.target == TargetKind::kClass) {
        to.labels[j] = from.labels[i];
    } else {
        const std::size_t t = from.target_length;
        std::copy_n(from.targets.begin() + static_cast<std::ptrdiff_t>(i * t), t,
                    to.targets.begin() + static_cast<std::ptrdiff_t>(j * t));
    }
}

Result<ExampleLayout> probe_example_layout(std::span<const std::uint8_t> record, const RecordKeys& keys,
                                           const ModelInput& model, const std::string& what) {
    std::vector<std::string> all = keys.inputs;
    all.insert(all.end(), keys.targets.begin(), keys.targets.end());
    std::vector<FeatureValues> values(all.size());
    if (auto ok = parse_example(record, all, values); !ok)
        return bad(what, "not a tf.train.Example (" + ok.error().message + ")");
    for (std::size_t i = 0; i < all.size(); ++i) {
        if (values[i].kind != FeatureKind::kMissing) continue;
        const bool input = i < keys.inputs.size();
        const std::string has = describe_example_keys(record);
        return bad(what, "has no feature '" + all[i] + "' (it has: " + (has.empty() ? "none" : has) + "); give " +
                             (input ? "--inputs " : "--targets ") + "KEY[,KEY...] to name the " +
                             (input ? "input" : "target") + " features");
    }
    ExampleLayout layout{model, PixelType::kFloat32};
    const FeatureKind in = values[0].kind;
    for (std::size_t i = 1; i < keys.inputs.size(); ++i)
        if (values[i].kind != in || in == FeatureKind::kBytes)
            return bad(what, "--inputs " + join_keys(keys.inputs) +
                                 ": several input features must all be float_list or all int64_list");
    if (in == FeatureKind::kBytes) {
        if (model.input != InputKind::kImage)
            return bad(what, "input feature '" + keys.inputs[0] + "' is a bytes_list (encoded images) but the model " +
                                 model.name + " takes " + model.input_text());
        layout.pixels = PixelType::kUint8;
    } else if (model.input == InputKind::kTokens && in != FeatureKind::kInt64) {
        return bad(what, "input feature '" + keys.inputs[0] + "' is a float_list but the model " + model.name +
                             " takes token ids (an int64_list)");
    }
    return layout;
}

ExampleDecoder::ExampleDecoder(ExampleLayout layout, RecordKeys keys, ResizeMode resize)
    : layout_(std::move(layout)), keys_(std::move(keys)) {
    target_ = ImageTarget{layout_.model.channels, layout_.model.height, layout_.model.width, resize};
    all_keys_ = keys_.inputs;
    all_keys_.insert(all_keys_.end(), keys_.targets.begin(), keys_.targets.end());
    n_inputs_ = keys_.inputs.size();
    values_.resize(all_keys_.size());
}

Result<void> ExampleDecoder::decode_image(std::span<const std::uint8_t> bytes, std::int32_t label, LabeledImages& to,
                                          std::size_t j, const std::string& what) {
    const std::size_t n = to.images.example_size();
    PSRUN_TRY(images_.decode(bytes, target_, std::span<std::uint8_t>(to.images.u8).subspan(j * n, n), what));
    to.labels[j] = label;
    return {};
}

Result<void> ExampleDecoder::decode_example(std::span<const std::uint8_t> record, LabeledImages& to, std::size_t j,
                                            const std::string& what) {
    if (auto ok = parse_example(record, all_keys_, values_); !ok)
        return bad(what, "not a tf.train.Example (" + ok.error().message + ")");
    if (auto ok = decode_input(record, to, j, what); !ok) return ok;
    return decode_target(record, to, j, what);
}

Result<void> ExampleDecoder::decode_input(std::span<const std::uint8_t> record, LabeledImages& to, std::size_t j,
                                          const std::string& what) {
    const ModelInput& m = layout_.model;
    const std::size_t n_inputs = n_inputs_;
    for (std::size_t i = 0; i < n_inputs; ++i)
        if (values_[i].kind == FeatureKind::kMissing)
            return bad(what, "has no feature '" + all_keys_[i] + "' (it has: " + describe_example_keys(record) + ")");
    if (layout_.pixels == PixelType::kUint8) {  // an encoded image
        const FeatureValues& v = values_[0];
        if (v.kind != FeatureKind::kBytes || v.bytes.size() != 1)
            return bad(what, "feature '" + all_keys_[0] + "' holds " + std::to_string(v.size()) + " " +
                                 to_string(v.kind) + " values, not one encoded image");
        const std::size_t n = to.images.example_size();
        PSRUN_TRY(images_.decode(v.bytes[0], target_, std::span<std::uint8_t>(to.images.u8).subspan(j * n, n),
                                 what + ": feature '" + all_keys_[0] + "'"));
        return {};
    }
    const std::size_t want = input_values(m);
    std::size_t have = 0;
    for (std::size_t i = 0; i < n_inputs; ++i) have += values_[i].size();
    if (have != want)
        return bad(what, "input features hold " + std::to_string(have) + " values but the model " + m.name + " takes " +
                             m.input_text() + " (" + std::to_string(want) + " values)");
    std::size_t k = 0;
    for (std::size_t i = 0; i < n_inputs; ++i) {
        const FeatureValues& v = values_[i];
        if (v.kind == FeatureKind::kBytes)
            return bad(what,
                       "feature '" + all_keys_[i] + "' is a bytes_list; numeric inputs need float_list or int64_list");
        if (m.input == InputKind::kTokens) {
            if (v.kind != FeatureKind::kInt64)
                return bad(what, "feature '" + all_keys_[i] + "' is a float_list; token ids need an int64_list");
            for (std::int64_t t : v.ints) {
                if (t < 0 || t >= m.vocabulary)
                    return bad(what, "token id " + std::to_string(t) + " in feature '" + all_keys_[i] +
                                         "' is out of range 0-" + std::to_string(m.vocabulary - 1) + " (the model " +
                                         m.name + " has a vocabulary of " + std::to_string(m.vocabulary) + ")");
                to.tokens[j * want + k++] = static_cast<std::int32_t>(t);
            }
            continue;
        }
        float* dst = to.images.f32.data() + j * want;
        if (v.kind == FeatureKind::kFloat) {
            for (float f : v.floats) {
                if (!std::isfinite(f)) return bad(what, "feature '" + all_keys_[i] + "' holds a NaN or infinity");
                dst[k++] = f;
            }
        } else {
            for (std::int64_t x : v.ints) dst[k++] = static_cast<float>(x);
        }
    }
    return {};
}

Result<void> ExampleDecoder::decode_target(std::span<const std::uint8_t> record, LabeledImages& to, std::size_t j,
                                           const std::string& what) {
    const ModelInput& m = layout_.model;
    const std::size_t first = n_inputs_;
    for (std::size_t i = first; i < all_keys_.size(); ++i)
        if (values_[i].kind == FeatureKind::kMissing)
            return bad(what, "has no feature '" + all_keys_[i] + "' (it has: " + describe_example_keys(record) +
                                 "); give --targets KEY");
    if (m.target == TargetKind::kClass) {
        const FeatureValues& v = values_[first];
        if (all_keys_.size() - n_inputs_ != 1 || v.kind != FeatureKind::kInt64 || v.ints.size() != 1)
            return bad(what, "target feature '" + all_keys_[first] + "' holds " + std::to_string(v.size()) + " " +
                                 to_string(v.kind) + " values; a class label is one int64");
        const std::int64_t l = v.ints[0];
        if (l < 0 || l >= m.classes)
            return bad(what, "label " + std::to_string(l) + " is out of range 0-" + std::to_string(m.classes - 1) +
                                 " (the model " + m.name + " has " + std::to_string(m.classes) + " classes)");
        to.labels[j] = static_cast<std::int32_t>(l);
        return {};
    }
    const std::size_t t = to.target_length;
    float* dst = to.targets.data() + j * t;
    std::fill(dst, dst + t, 0.0f);
    std::size_t k = 0;
    for (std::size_t i = first; i < all_keys_.size(); ++i) {
        const FeatureValues& v = values_[i];
        if (v.kind == FeatureKind::kInt64) {  // class indices of a multi-hot vector
            for (std::int64_t c : v.ints) {
                if (c < 0 || static_cast<std::uint64_t>(c) >= t)
                    return bad(what, "multi-hot index " + std::to_string(c) + " in feature '" + all_keys_[i] +
                                         "' is out of range 0-" + std::to_string(t - 1));
                dst[c] = 1.0f;
            }
            k = t;
        } else if (v.kind == FeatureKind::kFloat) {
            if (k + v.floats.size() > t)
                return bad(what, "target features hold more than the " + std::to_string(t) + " values the model " +
                                     m.name + " predicts");
            for (float f : v.floats) {
                if (!std::isfinite(f)) return bad(what, "feature '" + all_keys_[i] + "' holds a NaN or infinity");
                dst[k++] = f;
            }
        } else {
            return bad(what, "target feature '" + all_keys_[i] + "' is a bytes_list; give float_list or int64_list");
        }
    }
    if (k != t)
        return bad(what, "target features hold " + std::to_string(k) + " values but the model " + m.name +
                             " predicts " + std::to_string(t));
    return {};
}

}  // namespace psrun::worker
