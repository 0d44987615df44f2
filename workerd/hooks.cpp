#include "workerd/hooks.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "common/wire.h"
#include "workerd/chief_hooks.h"

namespace psrun::worker {

void HookList::add(std::unique_ptr<Hook> hook) {
    if (hook->chief_only() && !chief_) return;
    hooks_.push_back(std::move(hook));
}

void HookList::begin(RunContext& ctx) {
    for (auto& h : hooks_) h->begin(ctx);
}

void HookList::before_step(RunContext& ctx, float loss) {
    for (auto& h : hooks_) h->before_step(ctx, loss);
}

void HookList::after_step(RunContext& ctx, const StepResult& step) {
    for (auto& h : hooks_) h->after_step(ctx, step);
}

void HookList::end(RunContext& ctx, const StepResult& last) {
    for (auto& h : hooks_) h->end(ctx, last);
}

void StopAtStepHook::after_step(RunContext& ctx, const StepResult& step) {
    if (step.finished || step.global_step >= ctx.last_step) ctx.stop = true;
}

void NanGuardHook::before_step(RunContext& ctx, float loss) {
    const auto grads = ctx.trainer->grads().all();
    const bool loss_ok = std::isfinite(loss);
    if (loss_ok && wire::all_finite(grads.data(), grads.size())) return;
    throw std::runtime_error(
        fmt::format("worker {}: non-finite {} at local step {}: not pushing it; this worker stops (lower "
                    "--learning-rate, or check the data)",
                    ctx.index, loss_ok ? "gradient" : fmt::format("loss ({})", loss), ctx.local_steps + 1));
}

HookList make_hooks(const RunContext& ctx) {
    HookList hooks(ctx.chief);
    hooks.add(std::make_unique<NanGuardHook>());
    hooks.add(std::make_unique<StopAtStepHook>());
    add_chief_hooks(hooks);
    return hooks;
}

}  // namespace psrun::worker
