#include "workerd/data/labeled_images.h"

#include <charconv>
#include <cmath>

namespace psrun::worker {
namespace {

Result<std::vector<float>> parse_floats(std::string_view text, std::string_view whole) {
    std::vector<float> out;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = text.find(',', start);
        const std::string_view item =
            text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        float v = 0;
        const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
        if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || !std::isfinite(v))
            return make_error(ErrorCode::kInvalidArgument,
                              "--normalize '" + std::string(whole) + "': '" + std::string(item) + "' is not a number");
        out.push_back(v);
        if (comma == std::string_view::npos) return out;
        start = comma + 1;
    }
}

std::string range_text(int classes) { return "0-" + std::to_string(classes - 1); }

}  // namespace

std::string ImageArray::shape() const {
    return std::to_string(channels) + "x" + std::to_string(height) + "x" + std::to_string(width);
}

Result<Normalization> parse_normalization(std::string_view text) {
    Normalization n;
    if (text.empty()) return n;
    const auto bad = [&](const std::string& why) {
        return make_error(ErrorCode::kInvalidArgument, "--normalize '" + std::string(text) + "': " + why);
    };
    const std::size_t colon = text.find(':');
    if (colon == std::string_view::npos) {
        PSRUN_TRY_ASSIGN(auto pair, parse_floats(text, text));
        if (pair.size() != 2) return bad("expected MEAN,STD or M1,M2,...:S1,S2,...");
        n.mean = {pair[0]};
        n.std = {pair[1]};
    } else {
        PSRUN_TRY_ASSIGN(auto mean, parse_floats(text.substr(0, colon), text));
        auto std = parse_floats(text.substr(colon + 1), text);
        if (!std) return tl::unexpected(std.error());
        if (mean.size() != std->size())
            return bad(std::to_string(mean.size()) + " means but " + std::to_string(std->size()) + " stds");
        n.mean = std::move(mean);
        n.std = std::move(*std);
    }
    for (float s : n.std)
        if (!(s > 0)) return bad("every std must be > 0");
    return n;
}

std::string LabeledImages::input_text() const {
    switch (input) {
        case InputKind::kImage: return images.shape();
        case InputKind::kFeatures: return std::to_string(images.example_size()) + " features";
        case InputKind::kTokens: return std::to_string(token_length) + " tokens";
    }
    return {};
}

void conform_to_model(LabeledImages& split, const ModelInput& model) {
    ImageArray& a = split.images;
    if (split.input == InputKind::kFeatures && model.input == InputKind::kImage &&
        static_cast<std::int64_t>(a.example_size()) == model.input_size() && split.normalization.mean.size() <= 1) {
        split.input = InputKind::kImage;
        a.channels = model.channels;
        a.height = model.height;
        a.width = model.width;
    } else if (split.input == InputKind::kImage && model.input == InputKind::kFeatures &&
               static_cast<std::int64_t>(a.example_size()) == model.length && split.normalization.mean.size() <= 1) {
        split.input = InputKind::kFeatures;
        a.width = static_cast<int>(a.example_size());
        a.channels = 1;
        a.height = 1;
    }
}

namespace {

const char* kind_name(InputKind k) {
    switch (k) {
        case InputKind::kImage: return "images";
        case InputKind::kFeatures: return "feature vectors";
        case InputKind::kTokens: return "token ids";
    }
    return "?";
}

Result<void> check_input(const LabeledImages& split, const SplitNames& names, const ModelInput& model) {
    const auto mismatch = [&] {
        return make_error(ErrorCode::kInvalidArgument, names.images + ": " + split.input_text() +
                                                           " per example, the model " + model.name + " takes " +
                                                           model.input_text());
    };
    if (split.input != model.input) {
        if (split.input == InputKind::kTokens || model.input == InputKind::kTokens)
            return make_error(
                ErrorCode::kInvalidArgument,
                names.images + ": holds " + kind_name(split.input) + " but the model " + model.name + " takes " +
                    kind_name(model.input) + " (" + model.input_text() + ")" +
                    (model.input == InputKind::kTokens ? ": give an int32 or int64 array of token ids" : ""));
        return mismatch();
    }
    if (split.input == InputKind::kTokens) {
        if (static_cast<std::int64_t>(split.token_length) != model.length) return mismatch();
        if (split.size() > 0 && model.raw_ids == split.raw_tokens.empty())
            return make_error(ErrorCode::kInvalidArgument,
                              names.images + (model.raw_ids ? ": read as token ids, but a table keyed by raw ids "
                                                              "(--raw-ids) reads them (a bug: load them as raw ids)"
                                                            : ": read as raw ids, but no table keyed by raw ids "
                                                              "(--raw-ids) reads them (a bug)"));
        for (std::size_t i = 0; i < split.tokens.size(); ++i) {
            const std::int32_t t = split.tokens[i];
            if (t < 0 || t >= model.vocabulary)
                return make_error(ErrorCode::kInvalidArgument,
                                  names.images + ": token id " + std::to_string(t) + " at example " +
                                      std::to_string(i / split.token_length) + " position " +
                                      std::to_string(i % split.token_length) + " is out of range 0-" +
                                      std::to_string(model.vocabulary - 1) + " (the model " + model.name +
                                      " has a vocabulary of " + std::to_string(model.vocabulary) + ")");
        }
        return {};
    }
    const ImageArray& a = split.images;
    if (static_cast<std::int64_t>(a.example_size()) != model.input_size()) return mismatch();
    if (split.input == InputKind::kImage &&
        (a.channels != model.channels || a.height != model.height || a.width != model.width))
        return mismatch();
    return {};
}

Result<void> check_target(const LabeledImages& split, const SplitNames& names, const ModelInput& model) {
    const std::size_t n = split.size();
    if (split.target != model.target)
        return make_error(
            ErrorCode::kInvalidArgument,
            names.labels + ": holds " +
                (split.target == TargetKind::kClass ? std::string("class labels")
                                                    : "target vectors of " + std::to_string(split.target_length)) +
                " but the model " + model.name + " predicts " +
                (model.target == TargetKind::kClass
                     ? std::to_string(model.classes) + " classes (give integer labels)"
                     : "a vector of " + std::to_string(model.target_length) + " values (give float targets)"));
    if (split.target == TargetKind::kVector) {
        if (static_cast<std::int64_t>(split.target_length) != model.target_length)
            return make_error(ErrorCode::kInvalidArgument, names.labels + ": " + std::to_string(split.target_length) +
                                                               " target values per example, the model " + model.name +
                                                               " predicts " + std::to_string(model.target_length));
        const std::size_t have = split.target_length ? split.targets.size() / split.target_length : 0;
        if (have != n)
            return make_error(ErrorCode::kInvalidArgument, names.labels + ": holds " + std::to_string(have) +
                                                               " targets but " + names.images + " holds " +
                                                               std::to_string(n) + " examples");
        for (std::size_t i = 0; i < split.targets.size(); ++i)
            if (!std::isfinite(split.targets[i]))
                return make_error(ErrorCode::kInvalidArgument, names.labels + ": target of example " +
                                                                   std::to_string(i / split.target_length) +
                                                                   " is not finite (NaN or infinity)");
        return {};
    }
    if (split.labels.size() != n) {
        return make_error(ErrorCode::kInvalidArgument,
                          names.labels + ": holds " + std::to_string(split.labels.size()) + " labels but " +
                              names.images + " holds " + std::to_string(n) +
                              (split.input == InputKind::kImage ? " images" : " examples"));
    }
    for (std::size_t i = 0; i < split.labels.size(); ++i) {
        const std::int32_t l = split.labels[i];
        if (l < 0 || l >= model.classes)
            return make_error(ErrorCode::kInvalidArgument, names.labels + ": label " + std::to_string(l) +
                                                               " at index " + std::to_string(i) + " is out of range " +
                                                               range_text(model.classes) + " (the model " + model.name +
                                                               " has " + std::to_string(model.classes) + " classes)");
    }
    return {};
}

}  // namespace

Result<void> check_fits_model(const LabeledImages& split, const SplitNames& names, const ModelInput& model) {
    if (auto ok = check_input(split, names, model); !ok) return ok;
    if (auto ok = check_target(split, names, model); !ok) return ok;
    const std::size_t pairs = split.normalization.mean.size();
    const ImageArray& a = split.images;
    if (split.input != InputKind::kTokens && pairs != 0 && pairs != 1 && pairs != static_cast<std::size_t>(a.channels))
        return make_error(ErrorCode::kInvalidArgument, "--normalize gives " + std::to_string(pairs) +
                                                           " mean/std pairs but " + names.images + " has " +
                                                           std::to_string(a.channels) + " channels (give 1 pair or " +
                                                           std::to_string(a.channels) + ")");
    return {};
}

}  // namespace psrun::worker
