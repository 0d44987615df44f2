// CHUNK bodies (docs/protocol.md "Elastic data"): a worker's request for a data chunk and psd
// shard 0's grant. The other bodies are in common/wire_bodies.cpp.
#include "common/coding.h"
#include "common/wire.h"

namespace psrun::wire {

std::string encode_chunk_request(const ChunkRequest& request) {
    std::string out;
    put_fixed64(out, request.examples);
    put_fixed32(out, request.chunks);
    put_fixed64(out, request.seed);
    put_fixed8(out, request.want ? 1 : 0);
    put_fixed32(out, static_cast<std::uint32_t>(request.done.size()));
    for (const ChunkRef& r : request.done) {
        put_fixed64(out, r.epoch);
        put_fixed32(out, r.chunk);
    }
    return out;
}

Result<ChunkRequest> decode_chunk_request(std::string_view bytes) {
    Decoder d(bytes);
    ChunkRequest r;
    std::uint8_t want = 0;
    std::uint32_t n = 0;
    if (!d.get64(r.examples) || !d.get32(r.chunks) || !d.get64(r.seed) || !d.get8(want) || !d.get32(n))
        return protocol_error("truncated CHUNK request");
    if (r.examples == 0 || r.chunks == 0 || r.chunks > r.examples)
        return protocol_error("CHUNK request: bad plan (" + std::to_string(r.chunks) + " chunks of " +
                              std::to_string(r.examples) + " examples)");
    if (want > 1) return protocol_error("CHUNK request: want must be 0 or 1");
    if (n > kMaxChunkReports) return protocol_error("CHUNK request: more than 1024 done chunks");
    r.want = want == 1;
    r.done.resize(n);
    for (ChunkRef& c : r.done) {
        if (!d.get64(c.epoch) || !d.get32(c.chunk)) return protocol_error("truncated CHUNK request");
        if (c.chunk >= r.chunks) return protocol_error("CHUNK request: done chunk beyond the plan");
    }
    if (d.remaining() != 0) return protocol_error("CHUNK request: trailing bytes");
    return r;
}

std::string encode_chunk_grant(const ChunkGrant& grant) {
    std::string out;
    put_fixed8(out, grant.leased ? 1 : 0);
    if (!grant.leased) return out;
    put_fixed64(out, grant.id.epoch);
    put_fixed32(out, grant.id.chunk);
    put_fixed64(out, grant.first);
    put_fixed32(out, grant.count);
    return out;
}

Result<ChunkGrant> decode_chunk_grant(std::string_view bytes) {
    Decoder d(bytes);
    ChunkGrant g;
    std::uint8_t leased = 0;
    if (!d.get8(leased) || leased > 1) return protocol_error("bad CHUNK grant");
    g.leased = leased == 1;
    if (g.leased && (!d.get64(g.id.epoch) || !d.get32(g.id.chunk) || !d.get64(g.first) || !d.get32(g.count) ||
                     g.count == 0 || g.first > ~std::uint64_t{0} - g.count))
        return protocol_error("bad CHUNK grant");
    if (d.remaining() != 0) return protocol_error("CHUNK grant: trailing bytes");
    return g;
}

}  // namespace psrun::wire
