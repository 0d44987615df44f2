#include "workerd/data/decode_all.h"

#include <algorithm>
#include <optional>
#include <string>
#include <system_error>
#include <thread>

#include "common/option_checks.h"

#include "workerd/data/example_decoder.h"

namespace psrun::worker {
namespace {

// Appends the first `count` examples of `from` to `to` (same layout).
void append_examples(LabeledImages& to, const LabeledImages& from, std::size_t count) {
    auto append = [count](auto& dst, const auto& src, std::size_t per) {
        dst.insert(dst.end(), src.begin(), src.begin() + static_cast<std::ptrdiff_t>(count * per));
    };
    const std::size_t per_input = from.input == InputKind::kTokens ? from.token_length : from.images.example_size();
    if (from.input == InputKind::kTokens) append(to.tokens, from.tokens, per_input);
    else if (from.images.type == PixelType::kUint8) append(to.images.u8, from.images.u8, per_input);
    else append(to.images.f32, from.images.f32, per_input);
    if (from.input != InputKind::kTokens) to.images.count += count;
    if (from.target == TargetKind::kClass) append(to.labels, from.labels, 1);
    else append(to.targets, from.targets, from.target_length);
}

}  // namespace

Result<std::shared_ptr<LabeledImages>> decode_all(RecordProducer& producer, const PipelineConfig& c, int threads_given,
                                                  std::uint64_t& skipped) {
    auto out = std::make_shared<LabeledImages>(make_examples(c.layout, 0));
    out->normalization = c.normalization;
    const std::size_t threads = static_cast<std::size_t>(std::clamp(threads_given, 1, max_threads()));
    std::vector<std::unique_ptr<ExampleDecoder>> decoders;
    for (std::size_t t = 0; t < threads; ++t)
        decoders.push_back(std::make_unique<ExampleDecoder>(c.layout, c.keys, c.resize));
    constexpr std::size_t kGroup = 4096;
    std::vector<RawRecord> group(kGroup);
    skipped = 0;
    bool end = false;
    while (!end) {
        std::size_t n = 0;
        while (n < kGroup) {
            PSRUN_TRY_ASSIGN(auto more, producer.next(group[n]));
            if (!more) {
                end = true;
                break;
            }
            ++n;
        }
        LabeledImages decoded = make_examples(c.layout, n);
        std::vector<std::optional<Error>> errors(n);
        std::vector<std::optional<Error>> thrown(threads);  // an exception ends the pass, even under kSkip
        std::vector<std::thread> pool;
        std::optional<Error> refused;  // the host refused a thread: join the started ones, then fail
        for (std::size_t t = 0; t < threads && !refused; ++t) try {
                pool.emplace_back([&, t] {
                    try {
                        for (std::size_t i = t; i < n; i += threads) {
                            const RawRecord& r = group[i];
                            const std::string what = producer.describe(r);
                            auto ok = producer.examples()
                                          ? decoders[t]->decode_example(r.bytes, decoded, i, what)
                                          : decoders[t]->decode_image(r.bytes, r.label, decoded, i, what);
                            if (!ok) errors[i] = ok.error();
                        }
                    } catch (const std::exception& e) {  // nothing may leave a thread (std::terminate)
                        thrown[t] = Error{ErrorCode::kIo, std::string("decoding the data failed: ") + e.what()};
                    }
                });
            } catch (const std::system_error& e) {
                refused = Error{ErrorCode::kIo, "decoding the data: the host refused thread " + std::to_string(t + 1) +
                                                    " of " + std::to_string(threads) + ": " + e.what() +
                                                    "; give fewer --data-threads"};
            }
        for (auto& th : pool) th.join();
        if (refused) return tl::unexpected(std::move(*refused));
        for (auto& e : thrown)
            if (e) return tl::unexpected(std::move(*e));
        // Compact: drop (skip) or report the failures, in record order.
        std::size_t kept = 0;
        for (std::size_t i = 0; i < n; ++i) {
            if (errors[i]) {
                if (c.corrupt == CorruptRecords::kError) return tl::unexpected(*errors[i]);
                ++skipped;
                continue;
            }
            if (kept != i) copy_example(decoded, i, decoded, kept);
            ++kept;
        }
        append_examples(*out, decoded, kept);
    }
    skipped += producer.skipped();
    return out;
}

}  // namespace psrun::worker
