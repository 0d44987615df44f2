#include "common/optimizer.h"

#include <fnmatch.h>
#include <cassert>
#include <cmath>

namespace psrun {

Result<OptimizerKind> parse_optimizer_kind(std::string_view name) {
    if (name == "sgd") return OptimizerKind::kSgd;
    if (name == "momentum") return OptimizerKind::kMomentum;
    if (name == "adagrad") return OptimizerKind::kAdagrad;
    if (name == "adam") return OptimizerKind::kAdam;
    if (name == "nesterov") return OptimizerKind::kNesterov;
    if (name == "adam_torch") return OptimizerKind::kAdamTorch;
    if (name == "adamw") return OptimizerKind::kAdamW;
    if (name == "lamb") return OptimizerKind::kLamb;
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown optimizer '" + std::string(name) +
                          "': use one of sgd, momentum, nesterov, adagrad, adam (TF 1.x's), adam_torch, adamw, lamb");
}

Result<WeightDecayOn> parse_weight_decay_on(std::string_view name) {
    if (name == "matrices") return WeightDecayOn::kMatrices;
    if (name == "all") return WeightDecayOn::kAll;
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown value '" + std::string(name) + "': use matrices (tensors of rank >= 2) or all");
}

bool ParamGroup::matches(std::string_view tensor_name) const {
    return ::fnmatch(pattern.c_str(), std::string(tensor_name).c_str(), 0) == 0;
}

OptimizerConfig OptimizerConfig::for_tensor(std::string_view name, std::size_t rank) const {
    OptimizerConfig out = *this;
    out.groups.clear();
    out.weight_decay = decays(rank) ? weight_decay : 0.0f;
    out.weight_decay_on = WeightDecayOn::kAll;
    for (const auto& g : groups) {
        if (!g.matches(name)) continue;
        out.lr_multiplier = lr_multiplier * g.lr_multiplier;
        if (g.sets_weight_decay) out.weight_decay = g.weight_decay;
        break;
    }
    return out;
}

std::string_view to_string(WeightDecayOn on) { return on == WeightDecayOn::kAll ? "all" : "matrices"; }

std::string_view to_string(OptimizerKind kind) {
    switch (kind) {
        case OptimizerKind::kSgd: return "sgd";
        case OptimizerKind::kMomentum: return "momentum";
        case OptimizerKind::kAdagrad: return "adagrad";
        case OptimizerKind::kAdam: return "adam";
        case OptimizerKind::kNesterov: return "nesterov";
        case OptimizerKind::kAdamTorch: return "adam_torch";
        case OptimizerKind::kAdamW: return "adamw";
        case OptimizerKind::kLamb: return "lamb";
    }
    return "unknown";
}

std::string_view optimizer_form(OptimizerKind kind) {
    switch (kind) {
        case OptimizerKind::kAdam: return "tf1 epsilon-hat";
        case OptimizerKind::kNesterov:
        case OptimizerKind::kAdamTorch:
        case OptimizerKind::kAdamW: return "torch";
        case OptimizerKind::kLamb: return "lamb (You et al.)";
        default: return "tf1";
    }
}

int slot_count(OptimizerKind kind) {
    switch (kind) {
        case OptimizerKind::kSgd: return 0;
        case OptimizerKind::kMomentum: return 1;
        case OptimizerKind::kAdagrad: return 1;
        case OptimizerKind::kAdam: return 2;
        case OptimizerKind::kNesterov: return 1;
        case OptimizerKind::kAdamTorch: return 2;
        case OptimizerKind::kAdamW: return 2;
        case OptimizerKind::kLamb: return 2;
    }
    return 0;
}

bool uses_momentum(OptimizerKind kind) { return kind == OptimizerKind::kMomentum || kind == OptimizerKind::kNesterov; }

bool uses_betas(OptimizerKind kind) {
    return kind == OptimizerKind::kAdam || kind == OptimizerKind::kAdamTorch || kind == OptimizerKind::kAdamW ||
           kind == OptimizerKind::kLamb;
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

Optimizer::Optimizer(const OptimizerConfig& config, std::size_t size) : config_(config), size_(size) {
    const int slots = slot_count(config.kind);
    const float init = config.kind == OptimizerKind::kAdagrad ? config.adagrad_initial : 0.0f;
    if (slots >= 1) slot0_.assign(size, init);
    if (slots >= 2) slot1_.assign(size, 0.0f);
    if (config.kind == OptimizerKind::kLamb) lamb_blocks_.resize((size + kLambBlockFloats - 1) / kLambBlockFloats);
}

std::vector<std::span<float>> Optimizer::slots() {
    std::vector<std::span<float>> out;
    if (!slot0_.empty()) out.emplace_back(slot0_);
    if (!slot1_.empty()) out.emplace_back(slot1_);
    return out;
}

void Optimizer::apply(std::span<float> params, std::span<const float> grads, bool decay) {
    begin_update();
    if (config_.kind == OptimizerKind::kLamb) {
        lamb_moments(params, grads, 0, size_, decay);
        lamb_finish();
        lamb_step(params, 0, size_, decay);
        return;
    }
    apply_range(params, grads, 0, size_, decay);
}

UpdateKernel::UpdateKernel(const OptimizerConfig& config, std::uint64_t t, bool decay)
    : kind_(config.kind),
      lr_(config.rate_at(t) * config.lr_multiplier),
      lr_t_(0.0f),
      momentum_(config.momentum),
      beta1_(config.beta1),
      beta2_(config.beta2),
      epsilon_(config.epsilon) {
    const double td = static_cast<double>(t);
    if (kind_ == OptimizerKind::kAdam) {
        lr_t_ = static_cast<float>(lr_ * std::sqrt(1.0 - std::pow(double(beta2_), td)) /
                                   (1.0 - std::pow(double(beta1_), td)));
    } else if (kind_ == OptimizerKind::kAdamTorch || kind_ == OptimizerKind::kAdamW) {
        // As torch.optim.Adam computes them: Python floats (double), then used on f32 tensors.
        lr_t_ = static_cast<float>(double(lr_) / (1.0 - std::pow(double(beta1_), td)));
        bc2_sqrt_ = static_cast<float>(std::sqrt(1.0 - std::pow(double(beta2_), td)));
    }
    if (kind_ == OptimizerKind::kLamb) {
        lamb_ = LambKernel(config, t, decay);
        return;
    }
    if (decay && config.weight_decay > 0.0f) {
        if (kind_ == OptimizerKind::kAdamW)
            shrink_ = static_cast<float>(1.0 - double(lr_) * double(config.weight_decay));
        else coupled_ = config.weight_decay;
    }
}

void UpdateKernel::operator()(float* p, const float* g, float* s0, float* s1, std::size_t n) const {
    if (kind_ == OptimizerKind::kLamb) return lamb_.whole(p, g, s0, s1, n);
    if (coupled_ != 0.0f) update<true>(p, g, s0, s1, n);
    else update<false>(p, g, s0, s1, n);
}

// The loops are written so that GCC vectorises them (parameters, gradients and slots are
// distinct allocations, hence __restrict). kCoupled: g + coupled_ * p replaces g.
template <bool kCoupled>
void UpdateKernel::update(float* __restrict p, const float* __restrict g, float* __restrict s0, float* __restrict s1,
                          std::size_t n) const {
    const float lr = lr_, wd = coupled_;
    auto grad = [&](std::size_t i) { return kCoupled ? g[i] + wd * p[i] : g[i]; };
    switch (kind_) {
        case OptimizerKind::kSgd:
            for (std::size_t i = 0; i < n; ++i) p[i] -= lr * grad(i);
            break;
        case OptimizerKind::kMomentum: {
            const float mu = momentum_;
            for (std::size_t i = 0; i < n; ++i) {
                s0[i] = mu * s0[i] + grad(i);
                p[i] -= lr * s0[i];
            }
            break;
        }
        case OptimizerKind::kNesterov: {  // torch: buf = mu buf + g; p -= lr (g + mu buf)
            const float mu = momentum_;
            for (std::size_t i = 0; i < n; ++i) {
                const float gi = grad(i);
                s0[i] = mu * s0[i] + gi;
                p[i] -= lr * (gi + mu * s0[i]);
            }
            break;
        }
        case OptimizerKind::kAdagrad:
            for (std::size_t i = 0; i < n; ++i) {
                const float gi = grad(i);
                s0[i] += gi * gi;
                p[i] -= lr * gi / std::sqrt(s0[i]);
            }
            break;
        case OptimizerKind::kAdam: {
            const float b1 = beta1_, b2 = beta2_, eps = epsilon_, lr_t = lr_t_;
            for (std::size_t i = 0; i < n; ++i) {
                const float gi = grad(i);
                s0[i] = b1 * s0[i] + (1.0f - b1) * gi;
                s1[i] = b2 * s1[i] + (1.0f - b2) * gi * gi;
                p[i] -= lr_t * s0[i] / (std::sqrt(s1[i]) + eps);
            }
            break;
        }
        case OptimizerKind::kAdamTorch:
        case OptimizerKind::kAdamW: {
            const float b1 = beta1_, b2 = beta2_, eps = epsilon_, step = lr_t_, bc2 = bc2_sqrt_, shrink = shrink_;
            for (std::size_t i = 0; i < n; ++i) {
                const float gi = grad(i);
                p[i] *= shrink;  // 1 unless kAdamW with decay
                s0[i] = b1 * s0[i] + (1.0f - b1) * gi;
                s1[i] = b2 * s1[i] + (1.0f - b2) * gi * gi;
                p[i] -= step * (s0[i] / (std::sqrt(s1[i]) / bc2 + eps));
            }
            break;
        }
        case OptimizerKind::kLamb:  // not element-wise: operator() runs lamb_.whole()
            break;
    }
}

void Optimizer::apply_range(std::span<float> params, std::span<const float> grads, std::size_t begin, std::size_t end,
                            bool decay) {
    assert(params.size() == size_ && grads.size() == size_ && begin <= end && end <= size_);
    float* s0 = slot0_.empty() ? nullptr : slot0_.data() + begin;
    float* s1 = slot1_.empty() ? nullptr : slot1_.data() + begin;
    UpdateKernel(config_, updates_, decay)(params.data() + begin, grads.data() + begin, s0, s1, end - begin);
}

void Optimizer::apply_range(std::span<float> params, std::span<const float> grads, std::size_t begin, std::size_t end,
                            const OptimizerConfig& tensor) {
    assert(params.size() == size_ && grads.size() == size_ && begin <= end && end <= size_ &&
           tensor.kind == config_.kind);
    float* s0 = slot0_.empty() ? nullptr : slot0_.data() + begin;
    float* s1 = slot1_.empty() ? nullptr : slot1_.data() + begin;
    UpdateKernel(tensor, updates_, true)(params.data() + begin, grads.data() + begin, s0, s1, end - begin);
}

void subtract_range(std::span<float> params, std::span<const float> delta, std::size_t begin, std::size_t end) {
    assert(params.size() == delta.size() && begin <= end && end <= params.size());
    float* __restrict p = params.data() + begin;
    const float* __restrict g = delta.data() + begin;
    for (std::size_t i = 0; i < end - begin; ++i) p[i] -= g[i];
}

}  // namespace psrun
