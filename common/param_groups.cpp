#include "common/param_groups.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace psrun {
namespace {

Error bad(std::string_view text, const std::string& what) {
    return Error{
        ErrorCode::kInvalidArgument,
        fmt::format("--param-group '{}': {} (expected PATTERN:lr_mult=M,weight_decay=W, e.g. '*/b:weight_decay=0' "
                    "or 'embedding*:lr_mult=10'; lr_mult and weight_decay finite numbers >= 0, at least one)",
                    text, what)};
}

bool parse_number(std::string_view text, float& out) {
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < 0 || v > 1e30) return false;
    out = static_cast<float>(v);
    return true;
}

}  // namespace

Result<ParamGroup> parse_param_group(std::string_view text) {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return tl::unexpected(bad(text, "no ':' after the pattern"));
    ParamGroup g;
    g.pattern = std::string(text.substr(0, colon));
    if (g.pattern.empty()) return tl::unexpected(bad(text, "empty pattern"));
    if (g.pattern.find(':') != std::string::npos) return tl::unexpected(bad(text, "the pattern holds ':'"));
    std::string_view rest = text.substr(colon + 1);
    bool lr = false;
    if (rest.empty()) return tl::unexpected(bad(text, "no setting after ':'"));
    while (!rest.empty()) {
        const auto comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        if (comma != std::string_view::npos && rest.empty()) return tl::unexpected(bad(text, "a trailing ','"));
        const auto eq = item.find('=');
        if (eq == std::string_view::npos) return tl::unexpected(bad(text, fmt::format("'{}' is not KEY=VALUE", item)));
        const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
        float* field = nullptr;
        bool* seen = nullptr;
        if (key == "lr_mult") {
            field = &g.lr_multiplier;
            seen = &lr;
        } else if (key == "weight_decay") {
            field = &g.weight_decay;
            seen = &g.sets_weight_decay;
        } else {
            return tl::unexpected(bad(text, fmt::format("unknown key '{}'", key)));
        }
        if (*seen) return tl::unexpected(bad(text, fmt::format("'{}' twice", key)));
        if (!parse_number(value, *field))
            return tl::unexpected(bad(text, fmt::format("{}={} is not a finite number >= 0", key, value)));
        *seen = true;
    }
    return g;
}

std::string to_string(const ParamGroup& g) {
    std::string out = fmt::format("{}:lr_mult={}", g.pattern, g.lr_multiplier);
    if (g.sets_weight_decay) out += fmt::format(",weight_decay={}", g.weight_decay);
    return out;
}

nlohmann::json to_json(const std::vector<ParamGroup>& groups) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& g : groups) {
        nlohmann::json j = {{"pattern", g.pattern}, {"lr_multiplier", g.lr_multiplier}};
        if (g.sets_weight_decay) j["weight_decay"] = g.weight_decay;
        out.push_back(std::move(j));
    }
    return out;
}

Result<std::vector<ParamGroup>> param_groups_from_json(const nlohmann::json& value) {
    auto invalid = [](const std::string& what) {
        return make_error(ErrorCode::kInvalidArgument, "param_groups: " + what);
    };
    if (!value.is_array()) return invalid("not an array");
    std::vector<ParamGroup> out;
    for (const auto& j : value) {
        if (!j.is_object() || !j.contains("pattern") || !j["pattern"].is_string() || !j.contains("lr_multiplier") ||
            !j["lr_multiplier"].is_number())
            return invalid("an entry without a string pattern and a numeric lr_multiplier");
        ParamGroup g;
        g.pattern = j["pattern"].get<std::string>();
        const double lr = j["lr_multiplier"].get<double>();
        if (g.pattern.empty() || g.pattern.find(':') != std::string::npos || !std::isfinite(lr) || lr < 0 || lr > 1e30)
            return invalid("an entry with an empty pattern, one holding ':', or a bad lr_multiplier");
        g.lr_multiplier = static_cast<float>(lr);
        if (j.contains("weight_decay")) {
            if (!j["weight_decay"].is_number()) return invalid("a weight_decay that is not a number");
            const double wd = j["weight_decay"].get<double>();
            if (!std::isfinite(wd) || wd < 0 || wd > 1e30)
                return invalid("a weight_decay that is not a finite number >= 0");
            g.sets_weight_decay = true;
            g.weight_decay = static_cast<float>(wd);
        }
        out.push_back(std::move(g));
    }
    return out;
}

}  // namespace psrun
