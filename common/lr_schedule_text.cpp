// LrSchedule's text forms: the --lr-schedule syntax, the workerd flags, and the checkpoint JSON.
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "common/lr_schedule.h"

namespace psrun {
namespace {

constexpr std::string_view kKinds = "constant, exponential, piecewise, cosine, onecycle";

std::optional<LrScheduleKind> kind_named(std::string_view name) {
    for (std::uint8_t k = 0; k <= kMaxLrScheduleKind; ++k)
        if (to_string(static_cast<LrScheduleKind>(k)) == name) return static_cast<LrScheduleKind>(k);
    return std::nullopt;
}

// The fields each kind accepts (warmup and warmup_start: every kind).
std::set<std::string> fields_of(LrScheduleKind kind) {
    std::set<std::string> out{"warmup", "warmup_start"};
    switch (kind) {
        case LrScheduleKind::kConstant: break;
        case LrScheduleKind::kExponential: out.insert({"rate", "steps"}); break;
        case LrScheduleKind::kPiecewise: out.insert({"boundaries", "values"}); break;
        case LrScheduleKind::kCosine: out.insert({"steps", "alpha"}); break;
        case LrScheduleKind::kOneCycle: out.insert({"total", "pct", "div", "final_div"}); break;
    }
    return out;
}

std::string join(const std::set<std::string>& names) {
    std::string out;
    for (const auto& n : names) {
        if (!out.empty()) out += ", ";
        out += n;
    }
    return out;
}

Result<std::uint64_t> whole(std::string_view where, std::string_view text) {
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v > kMaxLrSteps)
        return invalid_argument(std::string(where) + "='" + std::string(text) +
                                "' is not a whole number of steps in 0.." + std::to_string(kMaxLrSteps));
    return v;
}

Result<float> real(std::string_view where, std::string_view text) {
    float v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
        return invalid_argument(std::string(where) + "='" + std::string(text) + "' is not a finite number");
    return v;
}

}  // namespace

Result<LrSchedule> parse_lr_schedule(std::string_view text) {
    const auto colon = text.find(':');
    const std::string_view name = text.substr(0, colon);
    const auto kind = kind_named(name);
    if (!kind)
        return invalid_argument("unknown learning-rate schedule '" + std::string(name) + "': use one of " +
                                std::string(kKinds));
    const std::string k = std::string(name) + ": ";
    const auto allowed = fields_of(*kind);
    // FIELD=V[,V...] items separated by ',' or ';': an item without '=' continues the field before.
    std::map<std::string, std::vector<std::string_view>> fields;
    std::string current;
    std::string_view rest = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
    if (colon != std::string_view::npos && rest.empty())
        return invalid_argument(k + "nothing after ':' (drop the ':' or add FIELD=VALUE)");
    while (!rest.empty()) {
        const auto cut = rest.find_first_of(",;");
        const std::string_view item = rest.substr(0, cut);
        rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + 1);
        if (item.empty()) return invalid_argument(k + "empty item (two separators in a row, or one at the end)");
        if (cut != std::string_view::npos && rest.empty()) return invalid_argument(k + "empty item at the end");
        const auto eq = item.find('=');
        if (eq == std::string_view::npos) {
            if (current.empty()) return invalid_argument(k + "'" + std::string(item) + "' is not FIELD=VALUE");
            fields[current].push_back(item);
            continue;
        }
        current = std::string(item.substr(0, eq));
        if (!allowed.count(current))
            return invalid_argument(k + "unknown field '" + current + "': allowed: " + join(allowed));
        if (fields.count(current)) return invalid_argument(k + "field '" + current + "' given twice");
        if (eq + 1 == item.size()) return invalid_argument(k + current + " has no value");
        fields[current].push_back(item.substr(eq + 1));
    }
    auto scalar = [&](const std::string& f) -> Result<std::optional<std::string_view>> {
        auto it = fields.find(f);
        if (it == fields.end()) return std::optional<std::string_view>();
        if (it->second.size() != 1)
            return invalid_argument(k + f + " takes one value, got " + std::to_string(it->second.size()));
        return std::optional<std::string_view>(it->second.front());
    };
    auto need = [&](const std::string& f) -> Result<void> {
        if (!fields.count(f)) return invalid_argument(k + f + " is required (fields: " + join(allowed) + ")");
        return {};
    };
    LrSchedule s;
    s.kind = *kind;
    // Each scalar field: its text (if given) converted into `out`.
    auto set_whole = [&](const std::string& f, std::uint64_t& out) -> Result<void> {
        PSRUN_TRY_ASSIGN(auto v, scalar(f));
        if (!v) return {};
        PSRUN_TRY_ASSIGN(auto n, whole(k + f, *v));
        out = n;
        return {};
    };
    auto set_real = [&](const std::string& f, float& out) -> Result<void> {
        PSRUN_TRY_ASSIGN(auto v, scalar(f));
        if (!v) return {};
        PSRUN_TRY_ASSIGN(auto x, real(k + f, *v));
        out = x;
        return {};
    };
    std::vector<Result<void>> steps{set_whole("warmup", s.warmup_steps), set_real("warmup_start", s.warmup_start)};
    switch (s.kind) {
        case LrScheduleKind::kConstant: break;
        case LrScheduleKind::kExponential:
            steps.insert(steps.end(), {need("rate"), need("steps"), set_real("rate", s.decay_rate),
                                       set_whole("steps", s.decay_steps)});
            break;
        case LrScheduleKind::kPiecewise:
            steps.insert(steps.end(), {need("boundaries"), need("values")});
            if (fields.count("boundaries") && fields.count("values")) {
                if (fields["boundaries"].size() > kMaxLrBoundaries)
                    return invalid_argument(k + "boundaries must list 1.." + std::to_string(kMaxLrBoundaries) +
                                            " steps");
                for (auto b : fields["boundaries"]) {
                    PSRUN_TRY_ASSIGN(auto n, whole(k + "boundaries", b));
                    s.boundaries.push_back(n);
                }
                for (auto v : fields["values"]) {
                    PSRUN_TRY_ASSIGN(auto x, real(k + "values", v));
                    s.values.push_back(x);
                }
            }
            break;
        case LrScheduleKind::kCosine:
            steps.insert(steps.end(), {need("steps"), set_whole("steps", s.cosine_steps), set_real("alpha", s.alpha)});
            break;
        case LrScheduleKind::kOneCycle:
            steps.insert(steps.end(), {need("total"), set_whole("total", s.total_steps), set_real("pct", s.pct_start),
                                       set_real("div", s.div_factor), set_real("final_div", s.final_div_factor)});
            break;
    }
    for (const auto& r : steps)
        if (!r) return tl::unexpected(r.error());
    PSRUN_TRY(s.validate());
    return s;
}

Result<LrSchedule> lr_schedule_from_flags(std::string_view text, std::int64_t warmup_steps, float decay_rate,
                                          std::int64_t decay_steps) {
    LrSchedule s;
    if (!text.empty()) {
        auto parsed = parse_lr_schedule(text);
        if (!parsed) return invalid_argument("--lr-schedule " + parsed.error().message);
        s = *parsed;
    }
    if (warmup_steps < 0 || static_cast<std::uint64_t>(warmup_steps) > kMaxLrSteps)
        return invalid_argument("--lr-warmup-steps must be in 0.." + std::to_string(kMaxLrSteps));
    if (warmup_steps > 0) {
        if (s.warmup_steps != 0 && s.warmup_steps != static_cast<std::uint64_t>(warmup_steps))
            return invalid_argument("--lr-warmup-steps " + std::to_string(warmup_steps) + " and --lr-schedule warmup=" +
                                    std::to_string(s.warmup_steps) + " disagree: give the warm-up once");
        s.warmup_steps = static_cast<std::uint64_t>(warmup_steps);
    }
    if (decay_steps > 0 && decay_rate != 1.0f && s.kind != LrScheduleKind::kConstant)
        return invalid_argument("--lr-schedule " + std::string(to_string(s.kind)) +
                                " and --lr-decay-rate/--lr-decay-steps both set the decay: use one (--lr-decay-rate R "
                                "--lr-decay-steps N is --lr-schedule exponential:rate=R,steps=N)");
    return s;
}

nlohmann::json to_json(const LrSchedule& s) {
    nlohmann::json j{
        {"kind", std::string(to_string(s.kind))}, {"warmup", s.warmup_steps}, {"warmup_start", s.warmup_start}};
    switch (s.kind) {
        case LrScheduleKind::kConstant: break;
        case LrScheduleKind::kExponential: j["rate"] = s.decay_rate, j["steps"] = s.decay_steps; break;
        case LrScheduleKind::kPiecewise: j["boundaries"] = s.boundaries, j["values"] = s.values; break;
        case LrScheduleKind::kCosine: j["steps"] = s.cosine_steps, j["alpha"] = s.alpha; break;
        case LrScheduleKind::kOneCycle:
            j["total"] = s.total_steps, j["pct"] = s.pct_start, j["div"] = s.div_factor,
            j["final_div"] = s.final_div_factor;
            break;
    }
    return j;
}

bool is_json_count(const nlohmann::json& j) {
    return j.is_number_unsigned() || (j.is_number_integer() && j.get<std::int64_t>() >= 0);
}

Result<LrSchedule> lr_schedule_from_json(const nlohmann::json& j) {
    if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string())
        return invalid_argument("learning-rate schedule record: expected an object with a \"kind\" string");
    const auto kind = kind_named(j["kind"].get<std::string>());
    if (!kind)
        return invalid_argument("learning-rate schedule record: unknown kind '" + j["kind"].get<std::string>() + "'");
    const auto allowed = fields_of(*kind);
    for (const auto& [key, value] : j.items())
        if (key != "kind" && !allowed.count(key))
            return invalid_argument("learning-rate schedule record: unknown field '" + key + "'");
    LrSchedule s;
    s.kind = *kind;
    bool ok = true;
    auto get_whole = [&](const char* key, std::uint64_t& out) {
        if (!j.contains(key)) return;
        if (!is_json_count(j[key])) ok = false;
        else out = j[key].get<std::uint64_t>();
    };
    auto get_real = [&](const char* key, float& out) {
        if (!j.contains(key)) return;
        if (!j[key].is_number()) ok = false;
        else out = j[key].get<float>();
    };
    get_whole("warmup", s.warmup_steps);
    get_real("warmup_start", s.warmup_start);
    get_real("rate", s.decay_rate);
    if (*kind == LrScheduleKind::kCosine) get_whole("steps", s.cosine_steps);
    if (*kind == LrScheduleKind::kExponential) get_whole("steps", s.decay_steps);
    get_real("alpha", s.alpha);
    get_whole("total", s.total_steps);
    get_real("pct", s.pct_start);
    get_real("div", s.div_factor);
    get_real("final_div", s.final_div_factor);
    if (*kind == LrScheduleKind::kPiecewise) {
        if (!j.contains("boundaries") || !j["boundaries"].is_array() || j["boundaries"].size() > kMaxLrBoundaries ||
            !j.contains("values") || !j["values"].is_array() || j["values"].size() > kMaxLrBoundaries + 1)
            return invalid_argument("learning-rate schedule record: piecewise needs boundaries and values arrays");
        for (const auto& b : j["boundaries"]) {
            if (!is_json_count(b)) ok = false;
            else s.boundaries.push_back(b.get<std::uint64_t>());
        }
        for (const auto& v : j["values"]) {
            if (!v.is_number()) ok = false;
            else s.values.push_back(v.get<float>());
        }
    }
    if (!ok) return invalid_argument("learning-rate schedule record: a field has the wrong type");
    if (auto valid = s.validate(); !valid)
        return invalid_argument("learning-rate schedule record: " + valid.error().message);
    return s;
}

}  // namespace psrun
