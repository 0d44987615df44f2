// The time budget of a preemption drain (docs/reliability.md "Preemption"), which psd and the
// chief derive from the same --signal-grace G: psrun passes the workers' --signal-grace to psd,
// and both daemons default to kDefaultSignalGrace.
//  - psd answers the chief's drain request once the other workers stopped, and at the latest
//    hold() = G/2 after draining began (a stalled worker must not cost the checkpoint);
//  - the chief waits for that answer up to reply_wait() = hold() + slack() (the way of the
//    reply and psd's loop; slack is G/8, at least 500 ms), so it never gives up on a psd that
//    is still inside its budget;
//  - the checkpoint and the DONEs have the rest of G; psd exits G after draining began and a
//    worker still running G after its signal exits 1.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>

namespace psrun {

inline constexpr double kDefaultSignalGrace = 8.0;  // seconds, psd's and workerd's --signal-grace

struct DrainBudget {
    std::chrono::milliseconds grace;  // --signal-grace

    std::chrono::milliseconds hold() const { return grace / 2; }
    std::chrono::milliseconds slack() const { return std::max(grace / 8, std::chrono::milliseconds(500)); }
    std::chrono::milliseconds reply_wait() const { return hold() + slack(); }
    // "--signal-grace 8.0 s: psd answers the drain request within 4.0 s, the chief waits 5.0 s".
    std::string describe() const;
};

}  // namespace psrun
