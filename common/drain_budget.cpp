#include "common/drain_budget.h"

#include <fmt/format.h>

namespace psrun {

std::string DrainBudget::describe() const {
    auto s = [](std::chrono::milliseconds ms) { return double(ms.count()) / 1000.0; };
    return fmt::format(
        "drain budget of --signal-grace {:.1f} s: psd answers the chief's drain request within {:.1f} s, "
        "the chief waits up to {:.1f} s for it, the checkpoint and DONE get the rest",
        s(grace), s(hold()), s(reply_wait()));
}

}  // namespace psrun
