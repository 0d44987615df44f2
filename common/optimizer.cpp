#include "common/optimizer.h"

#include <cassert>
#include <cmath>

namespace psrun {

Result<OptimizerKind> parse_optimizer_kind(std::string_view name) {
    if (name == "sgd") return OptimizerKind::kSgd;
    if (name == "momentum") return OptimizerKind::kMomentum;
    if (name == "adagrad") return OptimizerKind::kAdagrad;
    if (name == "adam") return OptimizerKind::kAdam;
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown optimizer '" + std::string(name) +
                          "': use one of sgd, momentum, adagrad, adam");
}

std::string_view to_string(OptimizerKind kind) {
    switch (kind) {
        case OptimizerKind::kSgd: return "sgd";
        case OptimizerKind::kMomentum: return "momentum";
        case OptimizerKind::kAdagrad: return "adagrad";
        case OptimizerKind::kAdam: return "adam";
    }
    return "unknown";
}

int slot_count(OptimizerKind kind) {
    switch (kind) {
        case OptimizerKind::kSgd: return 0;
        case OptimizerKind::kMomentum: return 1;
        case OptimizerKind::kAdagrad: return 1;
        case OptimizerKind::kAdam: return 2;
    }
    return 0;
}

LrSchedule OptimizerConfig::effective_schedule() const {
    if (schedule.kind != LrScheduleKind::kConstant || decay_steps == 0 || decay_rate == 1.0f) return schedule;
    LrSchedule s = schedule;
    s.kind = LrScheduleKind::kExponential;
    s.decay_rate = decay_rate;
    s.decay_steps = decay_steps;
    return s;
}

float OptimizerConfig::rate_at(std::uint64_t t) const {
    if (schedule.kind == LrScheduleKind::kConstant && (decay_steps == 0 || decay_rate == 1.0f))
        return schedule.warmup_steps == 0 ? learning_rate : schedule.rate_at(learning_rate, t);
    if (schedule.kind != LrScheduleKind::kConstant) return schedule.rate_at(learning_rate, t);
    return effective_schedule().rate_at(learning_rate, t);  // a constant schedule: no vectors to copy
}

Optimizer::Optimizer(const OptimizerConfig& config, std::size_t size)
    : config_(config), size_(size) {
    const int slots = slot_count(config.kind);
    const float init = config.kind == OptimizerKind::kAdagrad ? config.adagrad_initial : 0.0f;
    if (slots >= 1) slot0_.assign(size, init);
    if (slots >= 2) slot1_.assign(size, 0.0f);
}

std::vector<std::span<float>> Optimizer::slots() {
    std::vector<std::span<float>> out;
    if (!slot0_.empty()) out.emplace_back(slot0_);
    if (!slot1_.empty()) out.emplace_back(slot1_);
    return out;
}

// The loops below are written so that GCC vectorises them (no aliasing through the spans'
// data pointers is possible: parameters, gradients and slots are distinct allocations).
void Optimizer::apply(std::span<float> params, std::span<const float> grads) {
    begin_update();
    apply_range(params, grads, 0, size_);
}

void Optimizer::apply_range(std::span<float> params, std::span<const float> grads, std::size_t begin,
                            std::size_t end) {
    assert(params.size() == size_ && grads.size() == size_ && begin <= end && end <= size_);
    float* __restrict p = params.data() + begin;
    const float* __restrict g = grads.data() + begin;
    const std::size_t n = end - begin;
    const float lr = config_.rate_at(updates_);
    switch (config_.kind) {
        case OptimizerKind::kSgd:
            for (std::size_t i = 0; i < n; ++i) p[i] -= lr * g[i];
            break;
        case OptimizerKind::kMomentum: {
            float* __restrict a = slot0_.data() + begin;
            const float mu = config_.momentum;
            for (std::size_t i = 0; i < n; ++i) {
                a[i] = mu * a[i] + g[i];
                p[i] -= lr * a[i];
            }
            break;
        }
        case OptimizerKind::kAdagrad: {
            float* __restrict a = slot0_.data() + begin;
            for (std::size_t i = 0; i < n; ++i) {
                a[i] += g[i] * g[i];
                p[i] -= lr * g[i] / std::sqrt(a[i]);
            }
            break;
        }
        case OptimizerKind::kAdam: {
            float* __restrict m = slot0_.data() + begin;
            float* __restrict v = slot1_.data() + begin;
            const double t = static_cast<double>(updates_);
            const float b1 = config_.beta1, b2 = config_.beta2, eps = config_.epsilon;
            const float lr_t = static_cast<float>(
                lr * std::sqrt(1.0 - std::pow(double(b2), t)) / (1.0 - std::pow(double(b1), t)));
            for (std::size_t i = 0; i < n; ++i) {
                m[i] = b1 * m[i] + (1.0f - b1) * g[i];
                v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
                p[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
            }
            break;
        }
    }
}

void subtract_range(std::span<float> params, std::span<const float> delta, std::size_t begin, std::size_t end) {
    assert(params.size() == delta.size() && begin <= end && end <= params.size());
    float* __restrict p = params.data() + begin;
    const float* __restrict g = delta.data() + begin;
    for (std::size_t i = 0; i < end - begin; ++i) p[i] -= g[i];
}

}  // namespace psrun
