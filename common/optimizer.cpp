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

void Optimizer::apply(std::span<float> params, std::span<const float> grads) {
    begin_update();
    apply_range(params, grads, 0, size_);
}

UpdateKernel::UpdateKernel(const OptimizerConfig& config, std::uint64_t t)
    : kind_(config.kind),
      lr_(config.rate_at(t)),
      lr_t_(0.0f),
      momentum_(config.momentum),
      beta1_(config.beta1),
      beta2_(config.beta2),
      epsilon_(config.epsilon) {
    if (kind_ == OptimizerKind::kAdam) {
        const double td = static_cast<double>(t);
        lr_t_ = static_cast<float>(lr_ * std::sqrt(1.0 - std::pow(double(beta2_), td)) /
                                   (1.0 - std::pow(double(beta1_), td)));
    }
}

// The loops are written so that GCC vectorises them (parameters, gradients and slots are
// distinct allocations, hence __restrict).
void UpdateKernel::operator()(float* __restrict p, const float* __restrict g, float* __restrict s0,
                              float* __restrict s1, std::size_t n) const {
    const float lr = lr_;
    switch (kind_) {
        case OptimizerKind::kSgd:
            for (std::size_t i = 0; i < n; ++i) p[i] -= lr * g[i];
            break;
        case OptimizerKind::kMomentum: {
            const float mu = momentum_;
            for (std::size_t i = 0; i < n; ++i) {
                s0[i] = mu * s0[i] + g[i];
                p[i] -= lr * s0[i];
            }
            break;
        }
        case OptimizerKind::kAdagrad:
            for (std::size_t i = 0; i < n; ++i) {
                s0[i] += g[i] * g[i];
                p[i] -= lr * g[i] / std::sqrt(s0[i]);
            }
            break;
        case OptimizerKind::kAdam: {
            const float b1 = beta1_, b2 = beta2_, eps = epsilon_, lr_t = lr_t_;
            for (std::size_t i = 0; i < n; ++i) {
                s0[i] = b1 * s0[i] + (1.0f - b1) * g[i];
                s1[i] = b2 * s1[i] + (1.0f - b2) * g[i] * g[i];
                p[i] -= lr_t * s0[i] / (std::sqrt(s1[i]) + eps);
            }
            break;
        }
    }
}

void Optimizer::apply_range(std::span<float> params, std::span<const float> grads, std::size_t begin,
                            std::size_t end) {
    assert(params.size() == size_ && grads.size() == size_ && begin <= end && end <= size_);
    float* s0 = slot0_.empty() ? nullptr : slot0_.data() + begin;
    float* s1 = slot1_.empty() ? nullptr : slot1_.data() + begin;
    UpdateKernel(config_, updates_)(params.data() + begin, grads.data() + begin, s0, s1, end - begin);
}

void subtract_range(std::span<float> params, std::span<const float> delta, std::size_t begin, std::size_t end) {
    assert(params.size() == delta.size() && begin <= end && end <= params.size());
    float* __restrict p = params.data() + begin;
    const float* __restrict g = delta.data() + begin;
    for (std::size_t i = 0; i < end - begin; ++i) p[i] -= g[i];
}

}  // namespace psrun
