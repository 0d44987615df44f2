// A small seeded generator (SplitMix64) with results independent of the standard library, so that
// a seed names the same shuffle, initial weights and dropout masks on every build.
// In common/ because the engine (dropout, initializers), the data readers and the runtime all use it.
#pragma once

#include <cmath>
#include <cstdint>

namespace psrun {

class Rng {
  public:
    explicit Rng(std::uint64_t seed) : state_(seed) {}
    // Seeds derived from several values (seed, shard, epoch, ...) without collisions in practice.
    Rng(std::uint64_t seed, std::uint64_t stream) : state_(seed) { state_ = next() ^ (stream * 0xD1B54A32D192ED03ull); }

    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // Uniform in [0, bound) (bound > 0), by 128-bit multiply (bias < 2^-32 for our sizes).
    std::uint64_t below(std::uint64_t bound) {
        __extension__ using U128 = unsigned __int128;
        return static_cast<std::uint64_t>((static_cast<U128>(next()) * bound) >> 64);
    }
    // Uniform in (0, 1).
    double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
    // Standard normal (Box-Muller; one value per call).
    double normal() {
        const double u1 = uniform(), u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
    // TF's truncated_normal: normal(0, stddev) redrawn while |x| > 2 stddev.
    float truncated_normal(float stddev) {
        for (;;) {
            const double x = normal();
            if (std::fabs(x) <= 2.0) return static_cast<float>(x * stddev);
        }
    }

  private:
    std::uint64_t state_;
};

}  // namespace psrun
