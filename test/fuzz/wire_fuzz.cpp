// libFuzzer target for the wire decoders (CHUNK's and JOIN's too, and the --param-group parser, whose groups INIT
// carries). The first input byte picks the decoder; the rest is the frame. Built and run by test/psd/fuzz.sh (clang
// -fsanitize=fuzzer,address).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/param_groups.h"
#include "common/shm_segment.h"
#include "common/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::string_view frame(reinterpret_cast<const char*>(data + 1), size - 1);
    using namespace psrun::wire;
    switch (data[0] % 13) {
        case 0: {
            auto h = decode_header(frame);
            if (h) {
                std::vector<std::size_t> sizes;
                for (const auto& f : h->frames) sizes.push_back(f.bytes);
                if (!check_frames(*h, sizes)) __builtin_trap();  // matching sizes must pass
                if (!sizes.empty()) {
                    sizes.back() += 1;
                    if (check_frames(*h, sizes)) __builtin_trap();  // a wrong size must fail
                }
                if (encode_header(*h) != frame) __builtin_trap();  // decoding is exact
                // aux is 0 but on a shared-memory push (a region) or a REJOINED reply from a ps (a timeout).
                const bool rejoined = (h->flags & kFlagRejoined) && h->role == Role::kPs;
                if (h->aux != 0 && !(h->flags & kFlagShm) && !rejoined) __builtin_trap();
            }
            break;
        }
        case 1: {
            auto t = decode_tensors(frame);
            if (t) {
                auto again = decode_tensors(encode_tensors(*t));
                if (!again || *again != *t) __builtin_trap();
            }
            auto hello = decode_hello(frame);
            if (hello) {
                auto again = decode_hello(encode_hello(*hello));
                if (!again || again->model != hello->model || again->tensors != hello->tensors) __builtin_trap();
            }
            break;
        }
        case 2: {
            auto w = decode_welcome(frame);
            if (w && (w->instance == 0 || encode_welcome(*w) != frame)) __builtin_trap();  // decoding is exact
            break;
        }
        case 3: (void)decode_init(frame); break;
        case 4: {
            auto dir = decode_save(frame);
            if (dir && (dir->empty() || dir->front() != '/' || dir->find('\0') != std::string::npos)) __builtin_trap();
            break;
        }
        case 5: {
            auto r = decode_restore(frame);
            if (r && encode_restore(*r) != frame) __builtin_trap();  // decoding is exact
            break;
        }
        case 6: {
            auto a = psrun::decode_attach(frame);
            if (a && psrun::encode_attach(*a) != frame) __builtin_trap();  // decoding is exact
            break;
        }
        case 7: {
            auto g = psrun::parse_param_group(frame);
            if (g) {  // what to_string writes parses back to the same group
                auto again = psrun::parse_param_group(psrun::to_string(*g));
                if (!again || !(*again == *g)) __builtin_trap();
                InitConfig init;
                init.optimizer.groups = {*g};
                auto decoded = decode_init(encode_init(init));
                if (!decoded || decoded->optimizer.groups != init.optimizer.groups) __builtin_trap();
            }
            break;
        }
        case 8: {  // CHUNK request (elastic data): decoding is exact, the plan and reports in range
            auto r = decode_chunk_request(frame);
            if (r && (encode_chunk_request(*r) != frame || r->chunks == 0 || r->chunks > r->examples ||
                      r->done.size() > kMaxChunkReports))
                __builtin_trap();
            break;
        }
        case 9: {  // CHUNK grant
            auto g = decode_chunk_grant(frame);
            if (g && (encode_chunk_grant(*g) != frame || (g->leased && g->count == 0))) __builtin_trap();
            break;
        }
        case 10: {  // JOIN request (psrun join): decoding is exact, the chunks and model in range
            auto r = decode_join_request(frame);
            if (r && (encode_join_request(*r) != frame || r->chunks == 0 || r->chunks > kMaxJoinChunks ||
                      r->model.name.empty() || !(r->model.hash.empty() || r->model.hash.size() == 64)))
                __builtin_trap();
            break;
        }
        case 11: {  // JOIN grant: an index below --max-workers, 1 <= workers <= --max-workers
            auto g = decode_join_grant(frame);
            if (g && (encode_join_grant(*g) != frame || g->index >= g->max_workers || g->num_workers == 0 ||
                      g->num_workers > g->max_workers))
                __builtin_trap();
            break;
        }
        default: (void)decode_error(frame); break;
    }
    return 0;
}
