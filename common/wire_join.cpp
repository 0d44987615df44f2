// JOIN bodies (docs/protocol.md "Joining"): a joining worker's request to psd 0 for an index and
// psd 0's grant. The other bodies are in common/wire_bodies.cpp and common/wire_chunks.cpp.
#include <algorithm>

#include "common/coding.h"
#include "common/wire.h"

namespace psrun::wire {

std::string encode_join_request(const JoinRequest& request) {
    std::string out;
    put_string16(out, request.model.name);
    put_string16(out, request.model.hash);
    put_fixed32(out, request.chunks);
    return out;
}

Result<JoinRequest> decode_join_request(std::string_view bytes) {
    Decoder d(bytes);
    JoinRequest r;
    if (!d.get_string16(r.model.name) || !d.get_string16(r.model.hash) || !d.get32(r.chunks))
        return protocol_error("truncated JOIN request");
    if (r.model.name.empty() || r.model.name.size() > kMaxModelNameBytes)
        return protocol_error("JOIN request: bad model name");
    const bool hex = std::all_of(r.model.hash.begin(), r.model.hash.end(),
                                 [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
    if (!(r.model.hash.empty() || (r.model.hash.size() == 64 && hex)))
        return protocol_error("JOIN request: bad model hash");
    if (r.chunks == 0 || r.chunks > kMaxJoinChunks)
        return protocol_error("JOIN request: data chunks must be 1..2^20 (a joiner reads the chunks psd 0 leases)");
    if (d.remaining() != 0) return protocol_error("JOIN request: trailing bytes");
    return r;
}

std::string encode_join_grant(const JoinGrant& grant) {
    std::string out;
    put_fixed32(out, grant.index);
    put_fixed32(out, grant.num_workers);
    put_fixed32(out, grant.max_workers);
    return out;
}

Result<JoinGrant> decode_join_grant(std::string_view bytes) {
    Decoder d(bytes);
    JoinGrant g;
    if (!d.get32(g.index) || !d.get32(g.num_workers) || !d.get32(g.max_workers))
        return protocol_error("truncated JOIN grant");
    if (g.num_workers == 0 || g.num_workers > g.max_workers || g.index >= g.max_workers)
        return protocol_error("bad JOIN grant (index " + std::to_string(g.index) + ", " +
                              std::to_string(g.num_workers) + " workers, at most " + std::to_string(g.max_workers) +
                              ")");
    if (d.remaining() != 0) return protocol_error("JOIN grant: trailing bytes");
    return g;
}

}  // namespace psrun::wire
