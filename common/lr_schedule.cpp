// LrSchedule: the rates, validation, text, wire and JSON forms (parsing: lr_schedule_parse.cpp).
#include "common/lr_schedule.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numbers>

#include <nlohmann/json.hpp>

namespace psrun {
namespace {

std::string number(double v) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
    return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

bool finite_in(float v, float lo, float hi) { return std::isfinite(v) && v >= lo && v <= hi; }

// The cosine interpolation PyTorch's OneCycleLR uses: `start` at pct 0, `end` at pct 1.
double cos_anneal(double start, double end, double pct) {
    return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
}

}  // namespace

std::string_view to_string(LrScheduleKind kind) {
    switch (kind) {
        case LrScheduleKind::kConstant: return "constant";
        case LrScheduleKind::kExponential: return "exponential";
        case LrScheduleKind::kPiecewise: return "piecewise";
        case LrScheduleKind::kCosine: return "cosine";
        case LrScheduleKind::kOneCycle: return "onecycle";
    }
    return "unknown";
}

// after(s) of the header, s >= 1.
static double after_warmup(const LrSchedule& s, double lr, std::uint64_t n) {
    const double step = static_cast<double>(n - 1);
    switch (s.kind) {
        case LrScheduleKind::kConstant: return lr;
        case LrScheduleKind::kExponential:
            // The expression OptimizerConfig::rate_at always used: results stay bit-identical.
            return lr * std::pow(static_cast<double>(s.decay_rate), step / static_cast<double>(s.decay_steps));
        case LrScheduleKind::kPiecewise: {
            const auto it = std::lower_bound(s.boundaries.begin(), s.boundaries.end(), n - 1);
            return s.values[static_cast<std::size_t>(it - s.boundaries.begin())];
        }
        case LrScheduleKind::kCosine: {
            const double steps = static_cast<double>(s.cosine_steps);
            const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * std::min(step, steps) / steps));
            return lr * ((1.0 - s.alpha) * cosine + s.alpha);
        }
        case LrScheduleKind::kOneCycle: {
            const double initial = lr / s.div_factor;
            const double floor = initial / s.final_div_factor;
            const double rise_end = static_cast<double>(s.pct_start) * static_cast<double>(s.total_steps) - 1.0;
            const double end = static_cast<double>(s.total_steps) - 1.0;
            if (step <= rise_end) return cos_anneal(initial, lr, step / rise_end);
            return cos_anneal(lr, floor, std::min(1.0, (step - rise_end) / (end - rise_end)));
        }
    }
    return lr;
}

float LrSchedule::rate_at(float base_rate, std::uint64_t t) const {
    if (t == 0) t = 1;
    const double lr = base_rate;
    if (t <= warmup_steps) {
        const double factor =
            warmup_start + (1.0 - warmup_start) * static_cast<double>(t) / static_cast<double>(warmup_steps);
        return static_cast<float>(factor * after_warmup(*this, lr, 1));
    }
    return static_cast<float>(after_warmup(*this, lr, t - warmup_steps));
}

Result<void> LrSchedule::validate() const {
    const std::string k = std::string(psrun::to_string(kind)) + ": ";
    const std::string max_steps = std::to_string(kMaxLrSteps);
    if (warmup_steps > kMaxLrSteps) return invalid_argument(k + "warmup must be in 0.." + max_steps);
    if (!finite_in(warmup_start, 0.0f, 1.0f))
        return invalid_argument(k + "warmup_start must be in [0, 1] (a factor of the rate)");
    switch (kind) {
        case LrScheduleKind::kConstant: return {};
        case LrScheduleKind::kExponential:
            if (!(finite_in(decay_rate, 0.0f, 1.0f) && decay_rate > 0.0f))
                return invalid_argument(k + "rate must be in (0, 1]");
            if (decay_steps < 1 || decay_steps > kMaxLrSteps)
                return invalid_argument(k + "steps must be in 1.." + max_steps);
            return {};
        case LrScheduleKind::kPiecewise:
            if (boundaries.empty() || boundaries.size() > kMaxLrBoundaries)
                return invalid_argument(k + "boundaries must list 1.." + std::to_string(kMaxLrBoundaries) + " steps");
            for (std::size_t i = 0; i < boundaries.size(); ++i)
                if (boundaries[i] > kMaxLrSteps || (i > 0 && boundaries[i] <= boundaries[i - 1]))
                    return invalid_argument(k + "boundaries must be strictly increasing steps in 0.." + max_steps);
            if (values.size() != boundaries.size() + 1)
                return invalid_argument(k + "values must list one rate more than boundaries (" +
                                        std::to_string(boundaries.size() + 1) + "), got " +
                                        std::to_string(values.size()));
            for (float v : values)
                if (!(std::isfinite(v) && v > 0.0f)) return invalid_argument(k + "values must be finite rates > 0");
            return {};
        case LrScheduleKind::kCosine:
            if (cosine_steps < 1 || cosine_steps > kMaxLrSteps)
                return invalid_argument(k + "steps must be in 1.." + max_steps);
            if (!finite_in(alpha, 0.0f, 1.0f))
                return invalid_argument(k + "alpha must be in [0, 1] (the floor, a factor of the rate)");
            return {};
        case LrScheduleKind::kOneCycle: {
            if (total_steps < 3 || total_steps > kMaxLrSteps)
                return invalid_argument(k + "total must be in 3.." + max_steps);
            if (!(finite_in(pct_start, 0.0f, 1.0f) && pct_start > 0.0f && pct_start < 1.0f))
                return invalid_argument(k + "pct must be in (0, 1)");
            const double rise = static_cast<double>(pct_start) * static_cast<double>(total_steps);
            if (rise < 2.0 || static_cast<double>(total_steps) - rise < 1.0)
                return invalid_argument(
                    k + "pct * total must be at least 2 updates and leave at least 1 to anneal, got " + number(rise));
            if (!(std::isfinite(div_factor) && div_factor >= 1.0f))
                return invalid_argument(k + "div must be a finite number >= 1");
            if (!(std::isfinite(final_div_factor) && final_div_factor >= 1.0f))
                return invalid_argument(k + "final_div must be a finite number >= 1");
            return {};
        }
    }
    return invalid_argument("unknown learning-rate schedule kind " + std::to_string(static_cast<int>(kind)));
}

std::string LrSchedule::to_string() const {
    std::string out(psrun::to_string(kind));
    std::vector<std::string> fields;
    auto list = [](const auto& xs) {
        std::string s;
        for (const auto& x : xs) {
            if (!s.empty()) s += ',';
            s += number(static_cast<double>(x));
        }
        return s;
    };
    switch (kind) {
        case LrScheduleKind::kConstant: break;
        case LrScheduleKind::kExponential:
            fields = {"rate=" + number(decay_rate), "steps=" + std::to_string(decay_steps)};
            break;
        case LrScheduleKind::kPiecewise: {
            std::string b;
            for (auto x : boundaries) {
                if (!b.empty()) b += ',';
                b += std::to_string(x);
            }
            fields = {"boundaries=" + b + ";values=" + list(values)};
            break;
        }
        case LrScheduleKind::kCosine:
            fields = {"steps=" + std::to_string(cosine_steps), "alpha=" + number(alpha)};
            break;
        case LrScheduleKind::kOneCycle:
            fields = {"total=" + std::to_string(total_steps), "pct=" + number(pct_start), "div=" + number(div_factor),
                      "final_div=" + number(final_div_factor)};
            break;
    }
    if (warmup_steps != 0) fields.push_back("warmup=" + std::to_string(warmup_steps));
    if (warmup_start != 0.0f) fields.push_back("warmup_start=" + number(warmup_start));
    for (std::size_t i = 0; i < fields.size(); ++i) {
        out += i == 0 ? ':' : (kind == LrScheduleKind::kPiecewise ? ';' : ',');
        out += fields[i];
    }
    return out;
}

void put_lr_schedule(std::string& out, const LrSchedule& s) {
    put_fixed8(out, static_cast<std::uint8_t>(s.kind));
    put_fixed64(out, s.warmup_steps);
    put_float(out, s.warmup_start);
    switch (s.kind) {
        case LrScheduleKind::kConstant: break;
        case LrScheduleKind::kExponential:
            put_float(out, s.decay_rate);
            put_fixed64(out, s.decay_steps);
            break;
        case LrScheduleKind::kPiecewise:
            put_fixed32(out, static_cast<std::uint32_t>(s.boundaries.size()));
            for (auto b : s.boundaries) put_fixed64(out, b);
            for (auto v : s.values) put_float(out, v);
            break;
        case LrScheduleKind::kCosine:
            put_fixed64(out, s.cosine_steps);
            put_float(out, s.alpha);
            break;
        case LrScheduleKind::kOneCycle:
            put_fixed64(out, s.total_steps);
            put_float(out, s.pct_start);
            put_float(out, s.div_factor);
            put_float(out, s.final_div_factor);
            break;
    }
}

Result<LrSchedule> read_lr_schedule(Decoder& in) {
    auto bad = [](const std::string& what) {
        return make_error(ErrorCode::kProtocol, "learning-rate schedule: " + what);
    };
    LrSchedule s;
    std::uint8_t kind = 0;
    if (!in.get8(kind) || !in.get64(s.warmup_steps) || !in.get_float(s.warmup_start)) return bad("truncated");
    if (kind > kMaxLrScheduleKind) return bad("unknown kind " + std::to_string(kind));
    s.kind = static_cast<LrScheduleKind>(kind);
    bool ok = true;
    switch (s.kind) {
        case LrScheduleKind::kConstant: break;
        case LrScheduleKind::kExponential: ok = in.get_float(s.decay_rate) && in.get64(s.decay_steps); break;
        case LrScheduleKind::kPiecewise: {
            std::uint32_t n = 0;
            if (!in.get32(n)) return bad("truncated");
            if (n == 0 || n > kMaxLrBoundaries)
                return bad("piecewise boundary count " + std::to_string(n) + " not in 1.." +
                           std::to_string(kMaxLrBoundaries));
            s.boundaries.resize(n);
            s.values.resize(n + 1);
            for (auto& b : s.boundaries) ok = ok && in.get64(b);
            for (auto& v : s.values) ok = ok && in.get_float(v);
            break;
        }
        case LrScheduleKind::kCosine: ok = in.get64(s.cosine_steps) && in.get_float(s.alpha); break;
        case LrScheduleKind::kOneCycle:
            ok = in.get64(s.total_steps) && in.get_float(s.pct_start) && in.get_float(s.div_factor) &&
                 in.get_float(s.final_div_factor);
            break;
    }
    if (!ok) return bad("truncated");
    if (auto valid = s.validate(); !valid) return bad(valid.error().message);
    return s;
}

}  // namespace psrun
