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
        const std::string_view item = text.substr(
            start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        float v = 0;
        const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
        if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() ||
            !std::isfinite(v))
            return make_error(ErrorCode::kInvalidArgument, "--normalize '" + std::string(whole) +
                                                               "': '" + std::string(item) +
                                                               "' is not a number");
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
        return make_error(ErrorCode::kInvalidArgument,
                          "--normalize '" + std::string(text) + "': " + why);
    };
    const std::size_t colon = text.find(':');
    if (colon == std::string_view::npos) {
        auto pair = parse_floats(text, text);
        if (!pair) return tl::unexpected(pair.error());
        if (pair->size() != 2) return bad("expected MEAN,STD or M1,M2,...:S1,S2,...");
        n.mean = {(*pair)[0]};
        n.std = {(*pair)[1]};
    } else {
        auto mean = parse_floats(text.substr(0, colon), text);
        if (!mean) return tl::unexpected(mean.error());
        auto std = parse_floats(text.substr(colon + 1), text);
        if (!std) return tl::unexpected(std.error());
        if (mean->size() != std->size())
            return bad(std::to_string(mean->size()) + " means but " + std::to_string(std->size()) +
                       " stds");
        n.mean = std::move(*mean);
        n.std = std::move(*std);
    }
    for (float s : n.std)
        if (!(s > 0)) return bad("every std must be > 0");
    return n;
}

Result<void> check_fits_model(const LabeledImages& split, const SplitNames& names,
                              const ModelInput& model) {
    const ImageArray& a = split.images;
    if (a.channels != model.channels || a.height != model.height || a.width != model.width) {
        return make_error(ErrorCode::kInvalidArgument,
                          names.images + ": " + a.shape() + " per example, the model " +
                              model.name + " takes " + std::to_string(model.channels) + "x" +
                              std::to_string(model.height) + "x" + std::to_string(model.width));
    }
    if (split.labels.size() != a.count) {
        return make_error(ErrorCode::kInvalidArgument,
                          names.labels + ": holds " + std::to_string(split.labels.size()) +
                              " labels but " + names.images + " holds " + std::to_string(a.count) +
                              " images");
    }
    for (std::size_t i = 0; i < split.labels.size(); ++i) {
        const std::int32_t l = split.labels[i];
        if (l < 0 || l >= model.classes)
            return make_error(ErrorCode::kInvalidArgument,
                              names.labels + ": label " + std::to_string(l) + " at index " +
                                  std::to_string(i) + " is out of range " +
                                  range_text(model.classes) + " (the model " + model.name +
                                  " has " + std::to_string(model.classes) + " classes)");
    }
    const std::size_t pairs = split.normalization.mean.size();
    if (pairs != 0 && pairs != 1 && pairs != static_cast<std::size_t>(a.channels))
        return make_error(ErrorCode::kInvalidArgument,
                          "--normalize gives " + std::to_string(pairs) + " mean/std pairs but " +
                              names.images + " has " + std::to_string(a.channels) +
                              " channels (give 1 pair or " + std::to_string(a.channels) + ")");
    return {};
}

}  // namespace psrun::worker
