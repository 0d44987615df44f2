// Learning-rate schedules (--lr-schedule, --lr-warmup-steps): the rate of each optimizer update,
// applied by psd per update (and by standalone workerd), sent in INIT/RESTORE and recorded in
// checkpoint manifests. Units: a rate is per update; t is the 1-based update number (Adam's t,
// Optimizer::updates() after the update is counted), so update t runs at global step t - 1.
//
// Warm-up: for 1 <= t <= W (warmup_steps) the rate rises linearly,
//   rate(t) = (warmup_start + (1 - warmup_start) * t / W) * after(1),
// from warmup_start (a factor, at t = 0; 0 makes the first update use after(1) / W) to after(1)
// at t = W. Afterwards rate(t) = after(t - W): the schedule's own clock starts when warm-up ends.
// after(s), s >= 1 the schedule's update number, step = s - 1, lr = base_rate (--learning-rate):
//   constant     lr
//   exponential  lr * rate ^ (step / steps)                    (TF 1.x exponential_decay, continuous)
//   piecewise    values[i] for boundaries[i-1] < step <= boundaries[i] (TF piecewise_constant: the
//                values are rates; lr is not used)
//   cosine       lr * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, steps) / steps)) + alpha)
//                (TF cosine_decay)
//   onecycle     PyTorch OneCycleLR (anneal_strategy cos, three_phase false) with max_lr = lr:
//                from lr / div up to lr over the first pct * total updates, then down to
//                lr / div / final_div at update total; held there afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/coding.h"
#include "common/result.h"

namespace psrun {

enum class LrScheduleKind : std::uint8_t {
    kConstant = 0,
    kExponential = 1,
    kPiecewise = 2,
    kCosine = 3,
    kOneCycle = 4
};
inline constexpr std::uint8_t kMaxLrScheduleKind = 4;
std::string_view to_string(LrScheduleKind kind);

inline constexpr std::size_t kMaxLrBoundaries = 64;
inline constexpr std::uint64_t kMaxLrSteps = 1ull << 40;  // any step count or boundary

struct LrSchedule {
    LrScheduleKind kind = LrScheduleKind::kConstant;
    std::uint64_t warmup_steps = 0;  // W; 0: no warm-up
    float warmup_start = 0.0f;       // [0, 1]: the warm-up's factor at t = 0
    // kExponential: 0 < decay_rate <= 1, 1 <= decay_steps.
    float decay_rate = 1.0f;
    std::uint64_t decay_steps = 0;
    // kPiecewise: 1..64 strictly increasing boundaries (global steps), values.size() ==
    // boundaries.size() + 1, each value > 0.
    std::vector<std::uint64_t> boundaries = {};
    std::vector<float> values = {};
    // kCosine: 1 <= cosine_steps, 0 <= alpha <= 1 (the floor, a fraction of lr).
    std::uint64_t cosine_steps = 0;
    float alpha = 0.0f;
    // kOneCycle: total_steps, 0 < pct_start < 1 with pct_start * total_steps >= 2 and
    // total_steps - pct_start * total_steps >= 1, div_factor >= 1, final_div_factor >= 1.
    std::uint64_t total_steps = 0;
    float pct_start = 0.3f;
    float div_factor = 25.0f;
    float final_div_factor = 1e4f;

    // The rate of update t (t >= 1; t = 0 is treated as 1). REQUIRES: validate() passed.
    float rate_at(float base_rate, std::uint64_t t) const;
    // Every field in range for its kind (message names the field and what is allowed).
    [[nodiscard]] Result<void> validate() const;
    // The --lr-schedule text that parses back to this schedule, e.g. "cosine:steps=5000,alpha=0.01".
    std::string to_string() const;
    bool operator==(const LrSchedule&) const = default;
};

// Parses the --lr-schedule syntax (docs/running.md "Learning-rate schedules"):
//   KIND[:FIELD=V[,V...][,FIELD=V...]]   fields separated by ',' or ';', list items by ','
//   constant | exponential:rate=R,steps=N | piecewise:boundaries=B1,B2;values=V0,V1,V2 |
//   cosine:steps=N[,alpha=A] | onecycle:total=N[,pct=P][,div=D][,final_div=F]
// and, in any kind, warmup=N and warmup_start=F. Errors are kInvalidArgument naming the field.
[[nodiscard]] Result<LrSchedule> parse_lr_schedule(std::string_view text);

// The schedule of the workerd flags: --lr-schedule `text` (empty: constant) with
// --lr-warmup-steps `warmup_steps` (0: as the text says). decay_steps > 0 with decay_rate < 1
// (--lr-decay-*) conflicts with any schedule that is not constant.
[[nodiscard]] Result<LrSchedule> lr_schedule_from_flags(std::string_view text, std::int64_t warmup_steps,
                                                        float decay_rate, std::int64_t decay_steps);

// Wire form (docs/protocol.md `schedule`); read_lr_schedule validates and fails on truncation.
void put_lr_schedule(std::string& out, const LrSchedule& schedule);
[[nodiscard]] Result<LrSchedule> read_lr_schedule(Decoder& in);

// Checkpoint manifest form: {"kind": "cosine", "steps": 5000, "alpha": 0.01, "warmup": 0, ...}.
nlohmann::json to_json(const LrSchedule& schedule);
// True for a JSON integer >= 0 (nlohmann keeps non-negative integers built in code as signed).
bool is_json_count(const nlohmann::json& j);
[[nodiscard]] Result<LrSchedule> lr_schedule_from_json(const nlohmann::json& j);

}  // namespace psrun
