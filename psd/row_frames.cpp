#include "psd/row_frames.h"

#include <cstring>
#include <string>

namespace psrun::psd {
namespace {

using wire::MessageType;
using wire::RowPart;

// A keyed table's ids frame of n uint64 ids: in place when aligned, else copied to `spare`;
// each owned by `shard` (RowTable::owner) and strictly ascending.
Result<std::span<const std::uint64_t>> parse_keys(const zmq::message_t& frame, std::size_t n, std::uint64_t* spare,
                                                  const RowTable& table, std::uint32_t num_shards, std::uint32_t shard,
                                                  const std::string& tensor) {
    const auto* keys = static_cast<const std::uint64_t*>(frame.data());
    if (reinterpret_cast<std::uintptr_t>(keys) % alignof(std::uint64_t) != 0) {
        std::memcpy(spare, frame.data(), n * 8);
        keys = spare;
    }
    const std::string name = "'" + tensor + "'";
    for (std::size_t k = 0; k < n; ++k) {
        if (const std::uint32_t owner = table.owner(keys[k], num_shards); owner != shard)
            return protocol_error("id " + std::to_string(keys[k]) + " of keyed table " + name + " belongs to shard " +
                                  std::to_string(owner) + ", not " + std::to_string(shard));
        if (k > 0 && keys[k] <= keys[k - 1])
            return protocol_error("ids of keyed table " + name + " are not strictly ascending (" +
                                  std::to_string(keys[k - 1]) + ", " + std::to_string(keys[k]) +
                                  "): the client sums duplicates and sorts");
    }
    return std::span<const std::uint64_t>(keys, n);
}

}  // namespace

Result<RowFrames> parse_row_frames(const ShardLayout& layout, const std::vector<TensorSpec>& tensors,
                                   std::uint32_t shard, MessageType type, PayloadForm form,
                                   std::span<const wire::FrameDesc> descs, std::span<const zmq::message_t> frames,
                                   std::vector<std::uint32_t>& id_spare, std::vector<std::uint64_t>& key_spare,
                                   std::vector<float>& value_spare) {
    if (form == PayloadForm::kShm) form = PayloadForm::kF32;
    const bool may_push = type == MessageType::kPush || type == MessageType::kPushPull;
    const bool may_pull = type == MessageType::kPull || type == MessageType::kPushPull;
    if (descs.size() != frames.size()) return protocol_error("row frame descriptors and frames differ in number");
    // Pass 1: structure and sizes, so that the spares are sized once and never move afterwards.
    struct Plan {
        RowPart part;
        std::uint32_t table;
        std::size_t ids;  // ids in the frame (values: of its ids frame)
    };
    std::vector<Plan> plan;
    std::size_t total_ids = 0, total_keys = 0, total_values = 0;
    int last_grad = -1, last_pull = -1;
    for (std::size_t i = 0; i < descs.size(); ++i) {
        const auto id = descs[i].id;
        const std::string where = "row frame " + std::to_string(i);
        if (!wire::is_row_frame(id)) return protocol_error(where + " is not a row frame (slice frames come first)");
        const RowPart part = wire::row_part(id);
        const std::uint32_t tensor = wire::row_tensor(id);
        const int table = layout.table_of(tensor);
        if (table < 0)
            return protocol_error(where + " names tensor " + std::to_string(tensor) + ", which is not a sparse table");
        const std::string name = "'" + tensors.at(tensor).name + "'";
        const std::size_t width = layout.tables[static_cast<std::size_t>(table)].width;
        switch (part) {
            case RowPart::kGradIds:
            case RowPart::kPullIds: {
                const bool grad = part == RowPart::kGradIds;
                if (grad && !may_push)
                    return protocol_error(where + ": gradient rows of " + name + " in a " +
                                          std::string(to_string(type)));
                if (!grad && !may_pull)
                    return protocol_error(where + ": rows of " + name + " pulled in a " + std::string(to_string(type)));
                if (grad && last_pull >= 0)
                    return protocol_error(where + ": gradient rows of " + name + " after the pulled rows");
                int& last = grad ? last_grad : last_pull;
                if (table <= last)
                    return protocol_error(where + ": tables must come once each, in tensor order (" + name + ")");
                last = table;
                const bool keyed = layout.tables[static_cast<std::size_t>(table)].keyed;
                const std::size_t id_bytes = keyed ? 8 : 4;
                if (descs[i].bytes % id_bytes != 0 || descs[i].bytes == 0 ||
                    descs[i].bytes / id_bytes > wire::kMaxRowsPerFrame)
                    return protocol_error(where + " (ids of " + name + ") must hold 1.." +
                                          std::to_string(wire::kMaxRowsPerFrame) +
                                          (keyed ? " uint64 ids (a keyed table)" : " uint32 ids"));
                const std::size_t n = descs[i].bytes / id_bytes;
                plan.push_back(Plan{part, static_cast<std::uint32_t>(table), n});
                (keyed ? total_keys : total_ids) += n;
                if (!grad) break;
                if (i + 1 == descs.size() || descs[i + 1].id != wire::row_frame_id(RowPart::kGradValues, tensor))
                    return protocol_error(where + ": the ids of " + name + " are not followed by their values");
                const std::uint64_t want = static_cast<std::uint64_t>(n) * width * value_bytes(form);
                if (descs[i + 1].bytes != want)
                    return protocol_error("row frame " + std::to_string(i + 1) + " (values of " + name + ") has " +
                                          std::to_string(descs[i + 1].bytes) + " bytes; " + std::to_string(n) +
                                          " rows of " + std::to_string(width) + " take exactly " +
                                          std::to_string(want) + " in " + std::string(to_string(form)));
                plan.push_back(Plan{RowPart::kGradValues, static_cast<std::uint32_t>(table), n});
                total_values += n * width;
                ++i;
                break;
            }
            default:
                return protocol_error(where + ": a " +
                                      (part == RowPart::kValues ? "reply's values" : "values frame without ids") +
                                      " in a request");
        }
    }
    // Pass 2: ids in place or copied, checked; values decoded.
    if (id_spare.size() < total_ids) id_spare.resize(total_ids);
    if (key_spare.size() < total_keys) key_spare.resize(total_keys);
    if (value_spare.size() < total_values) value_spare.resize(total_values);
    RowFrames out;
    std::size_t id_at = 0, key_at = 0, value_at = 0;
    for (std::size_t i = 0; i < plan.size(); ++i) {
        const auto& p = plan[i];
        const RowTable& table = layout.tables[p.table];
        const auto& frame = frames[i];
        if (p.part == RowPart::kGradValues) {
            const std::size_t n = p.ids * table.width;
            out.grads.back().values = decode_frame(frame, n, form, value_spare.data() + value_at);
            value_at += n;
            continue;
        }
        if (table.keyed) {
            PSRUN_TRY_ASSIGN(auto keys, parse_keys(frame, p.ids, key_spare.data() + key_at, table, layout.num_shards,
                                                   shard, tensors.at(table.tensor).name));
            key_at += p.ids;
            RowSlice slice{p.table, {}, {}, keys};
            (p.part == RowPart::kGradIds ? out.grads : out.pulls).push_back(slice);
            continue;
        }
        const auto* ids = static_cast<const std::uint32_t*>(frame.data());
        if (reinterpret_cast<std::uintptr_t>(ids) % alignof(std::uint32_t) != 0) {
            std::memcpy(id_spare.data() + id_at, frame.data(), p.ids * 4);
            ids = id_spare.data() + id_at;
        }
        id_at += p.ids;
        const std::string name = "'" + tensors.at(table.tensor).name + "'";
        for (std::size_t k = 0; k < p.ids; ++k) {
            if (ids[k] >= table.num_rows)
                return protocol_error("row id " + std::to_string(ids[k]) + " of " + name + " is not below its " +
                                      std::to_string(table.num_rows) + " rows");
            if (const std::uint32_t owner = table.owner(ids[k], layout.num_shards); owner != shard)
                return protocol_error("row id " + std::to_string(ids[k]) + " of " + name + " belongs to shard " +
                                      std::to_string(owner) + ", not " + std::to_string(shard));
            if (k > 0 && ids[k] <= ids[k - 1])
                return protocol_error("row ids of " + name + " are not strictly ascending (" +
                                      std::to_string(ids[k - 1]) + ", " + std::to_string(ids[k]) +
                                      "): the client sums duplicates and sorts");
        }
        RowSlice slice{p.table, std::span<const std::uint32_t>(ids, p.ids), {}};
        (p.part == RowPart::kGradIds ? out.grads : out.pulls).push_back(slice);
    }
    return out;
}

}  // namespace psrun::psd
