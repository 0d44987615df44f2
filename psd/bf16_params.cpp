#include "psd/bf16_params.h"

#include <string>
#include <thread>

namespace psrun::psd {
namespace {

constexpr std::size_t kMaxBf16Buffers = 4;
// Below this many floats the conversion runs on the calling thread (waking helpers costs more).
constexpr std::size_t kParallelFloats = 1 << 18;

}  // namespace

Bf16Buffer& Bf16Params::params(const ShardState& shard, ThreadTeam* team) {
    for (auto& b : buffers_)
        if (b->version == shard.version()) {
            ++reuses_;
            return *b;
        }
    Bf16Buffer* target = nullptr;
    while (!target) {
        for (auto& b : buffers_)
            if (b->holds.load(std::memory_order_acquire) == 0) target = b.get();
        if (!target && buffers_.size() < kMaxBf16Buffers)
            target = buffers_.emplace_back(std::make_unique<Bf16Buffer>()).get();
        if (!target) std::this_thread::yield();  // all held: ZeroMQ frees them soon
    }
    target->data.resize(shard.size());
    const int parts = (team && shard.size() >= kParallelFloats) ? team->size() : 1;
    auto convert = [&](int part) {
        for (std::size_t k = 0; k < shard.slice_ids().size(); ++k) {
            const auto src = shard.param_slice(k);
            const auto [begin, end] = part_range(src.size(), part, parts);
            wire::f32_to_bf16(
                src.subspan(begin, end - begin),
                std::span<std::uint16_t>(target->data.data() + shard.local_offset(k) + begin, end - begin));
        }
    };
    if (parts == 1) convert(0);
    else team->run(convert);
    target->version = shard.version();
    ++conversions_;
    return *target;
}

}  // namespace psrun::psd
