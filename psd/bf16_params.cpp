#include "psd/bf16_params.h"

#include <string>
#include <thread>

namespace psrun::psd {
namespace {

constexpr std::size_t kMaxBuffers = 4;
// Below this many floats the conversion runs on the calling thread (waking helpers costs more).
constexpr std::size_t kParallelFloats = 1 << 18;

}  // namespace

Result<std::vector<std::span<const float>>> Bf16Params::expand_gradient(const ShardState& shard,
                                                                         std::span<const wire::FrameDesc> descs,
                                                                         std::span<const zmq::message_t> frames) {
    const auto& ids = shard.slice_ids();
    if (descs.size() != ids.size() || frames.size() != ids.size())
        return make_error(ErrorCode::kProtocol, "expected " + std::to_string(ids.size()) + " bf16 slice frames, got " +
                                                    std::to_string(descs.size()));
    for (std::size_t k = 0; k < ids.size(); ++k) {
        const auto& slice = shard.layout().slices[ids[k]];
        if (descs[k].id != ids[k])
            return make_error(ErrorCode::kProtocol, "frame " + std::to_string(k) + " is not slice " +
                                                        std::to_string(ids[k]) + " of this shard");
        if (descs[k].bytes != slice.length * wire::kBf16Bytes || frames[k].size() != descs[k].bytes)
            return make_error(ErrorCode::kProtocol,
                              "bf16 gradient frame " + std::to_string(k) + " (slice " + std::to_string(ids[k]) +
                                  ") has " + std::to_string(frames[k].size()) + " bytes; its " +
                                  std::to_string(slice.length) + " values take exactly " +
                                  std::to_string(slice.length * wire::kBf16Bytes) + " bytes in bf16");
    }
    scratch_.resize(shard.size());
    std::vector<std::span<const float>> spans;
    for (std::size_t k = 0; k < ids.size(); ++k) {
        const std::span<float> out(scratch_.data() + shard.local_offset(k), shard.layout().slices[ids[k]].length);
        wire::bf16_bytes_to_f32(frames[k].data(), out);
        spans.emplace_back(out.data(), out.size());
    }
    return spans;
}

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
        if (!target && buffers_.size() < kMaxBuffers) target = buffers_.emplace_back(std::make_unique<Bf16Buffer>()).get();
        if (!target) std::this_thread::yield();  // all held: ZeroMQ frees them soon
    }
    target->data.resize(shard.size());
    const int parts = (team && shard.size() >= kParallelFloats) ? team->size() : 1;
    auto convert = [&](int part) {
        for (std::size_t k = 0; k < shard.slice_ids().size(); ++k) {
            const auto src = shard.param_slice(k);
            const auto [begin, end] = part_range(src.size(), part, parts);
            wire::f32_to_bf16(src.subspan(begin, end - begin),
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
