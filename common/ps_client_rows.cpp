// PsClient's sparse rows (docs/protocol.md "Sparse tables"): the rows of an exchange are checked,
// deduplicated (a repeated id's gradient rows summed, in the order given), sorted, and split
// over the shards (RowTable::owner: row r on shard r mod K, a keyed table's raw id on keyed_owner(), a small
// table's every row on its home shard); each shard gets, per table, a (gradient ids, values)
// frame pair and a pull-ids frame, and answers the pulled rows in that order.
#include <algorithm>
#include <cstring>

#include "common/ps_client.h"
#include "common/ps_client_rows.h"
#include "common/zmq_util.h"

namespace psrun {

using wire::FrameDesc;
using wire::Header;
using wire::RowPart;

Result<void> PsClient::plan_rows(std::span<const RowGrads> grads, std::span<const RowRequest> pulls, bool lookup) {
    if (!rows_) rows_ = std::make_unique<RowPlan>();
    RowPlan& plan = *rows_;
    const auto num_shards = static_cast<std::uint32_t>(sockets_.size());
    const auto& tables = layout_.tables;
    plan.parts.resize(num_shards);
    for (auto& shard : plan.parts) {
        shard.resize(tables.size());
        for (auto& part : shard) {
            part.grad_ids.clear();
            part.grad_values.clear();
            part.pull_ids.clear();
            part.grad_keys.clear();
            part.pull_keys.clear();
        }
    }
    plan.request_tables.clear();
    plan.where.clear();
    plan.any = !grads.empty() || !pulls.empty();
    plan.lookup = lookup;
    auto table_of = [&](std::uint32_t tensor, const char* what) -> Result<std::size_t> {
        const int t = layout_.table_of(tensor);
        if (t < 0)
            return make_error(
                ErrorCode::kInvalidArgument,
                std::string(what) + " names tensor " + std::to_string(tensor) + ", which is not a sparse table");
        return static_cast<std::size_t>(t);
    };
    auto check_id = [&](std::size_t t, std::uint64_t id) -> Result<void> {
        if (tables[t].keyed || id < tables[t].num_rows) return {};
        return make_error(ErrorCode::kInvalidArgument, "row id " + std::to_string(id) + " of sparse table '" +
                                                           options_.tensors[tables[t].tensor].name +
                                                           "' is not below its " + std::to_string(tables[t].num_rows) +
                                                           " rows");
    };
    // A keyed table's ids come in `keys`, any other's in `ids`: never both.
    auto check_form = [&](std::size_t t, bool has_ids, bool has_keys, const char* what) -> Result<void> {
        if (tables[t].keyed ? !has_ids : !has_keys) return {};
        return make_error(ErrorCode::kInvalidArgument,
                          std::string(what) + " of '" + options_.tensors[tables[t].tensor].name + "' come as " +
                              (tables[t].keyed ? "row ids, but it is keyed by raw 64-bit ids (keys)"
                                               : "raw 64-bit ids (keys), but it is not a keyed table"));
    };
    for (const auto& g : grads) {
        PSRUN_TRY_ASSIGN(auto table, table_of(g.tensor, "gradient rows"));
        if (auto ok = check_form(table, !g.ids.empty(), !g.keys.empty(), "gradient rows"); !ok) return ok;
    }
    // Row i of gradient g's or request r's ids, widened.
    auto id_at = [](const auto& x, std::size_t i) -> std::uint64_t { return x.keys.empty() ? x.ids[i] : x.keys[i]; };
    auto count = [](const auto& x) { return x.keys.empty() ? x.ids.size() : x.keys.size(); };
    auto owner = [&](std::size_t t, std::uint64_t id) { return tables[t].owner(id, num_shards); };
    // Gradients: every (id, source row) of a table, sorted by id (stable: sums in the order given).
    for (std::size_t t = 0; t < tables.size(); ++t) {
        const std::size_t width = tables[t].width;
        plan.order.clear();
        for (std::size_t g = 0; g < grads.size(); ++g) {
            if (static_cast<std::size_t>(layout_.table_of(grads[g].tensor)) != t) continue;
            const std::size_t n = count(grads[g]);
            if (grads[g].values.size() != n * width)
                return make_error(ErrorCode::kInvalidArgument,
                                  "gradient rows of '" + options_.tensors[tables[t].tensor].name +
                                      "': " + std::to_string(n) + " ids need " + std::to_string(n * width) +
                                      " values, got " + std::to_string(grads[g].values.size()));
            for (std::size_t i = 0; i < n; ++i) {
                if (auto ok = check_id(t, id_at(grads[g], i)); !ok) return ok;
                plan.order.emplace_back(id_at(grads[g], i), (static_cast<std::uint64_t>(g) << 32) | i);
            }
        }
        std::stable_sort(plan.order.begin(), plan.order.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        for (std::size_t k = 0; k < plan.order.size(); ++k) {
            const auto [id, source] = plan.order[k];
            const float* src = grads[source >> 32].values.data() + (source & 0xFFFFFFFFu) * width;
            auto& part = plan.parts[owner(t, id)][t];
            if (k > 0 && plan.order[k - 1].first == id) {  // a repeat: add to the row just appended
                float* dst = part.grad_values.data() + part.grad_values.size() - width;
                for (std::size_t c = 0; c < width; ++c) dst[c] += src[c];
                continue;
            }
            if (tables[t].keyed) part.grad_keys.push_back(id);
            else part.grad_ids.push_back(static_cast<std::uint32_t>(id));
            part.grad_values.insert(part.grad_values.end(), src, src + width);
        }
    }
    // Pulls: the union of a table's requested ids, each fetched once; every position remembers where.
    plan.where.resize(pulls.size());
    for (std::size_t r = 0; r < pulls.size(); ++r) {
        PSRUN_TRY_ASSIGN(auto table, table_of(pulls[r].tensor, "pulled rows"));
        if (auto ok = check_form(table, !pulls[r].ids.empty(), !pulls[r].keys.empty(), "pulled rows"); !ok) return ok;
        plan.request_tables.push_back(static_cast<std::uint32_t>(table));
        plan.where[r].assign(count(pulls[r]), {});
    }
    for (std::size_t t = 0; t < tables.size(); ++t) {
        plan.order.clear();
        for (std::size_t r = 0; r < pulls.size(); ++r) {
            if (plan.request_tables[r] != t) continue;
            for (std::size_t i = 0; i < count(pulls[r]); ++i) {
                if (auto ok = check_id(t, id_at(pulls[r], i)); !ok) return ok;
                plan.order.emplace_back(id_at(pulls[r], i), (static_cast<std::uint64_t>(r) << 32) | i);
            }
        }
        std::sort(plan.order.begin(), plan.order.end());
        for (std::size_t k = 0; k < plan.order.size(); ++k) {
            const auto [id, source] = plan.order[k];
            const std::uint32_t shard = owner(t, id);
            auto& part = plan.parts[shard][t];
            if (k == 0 || plan.order[k - 1].first != id) {
                if (tables[t].keyed) part.pull_keys.push_back(id);
                else part.pull_ids.push_back(static_cast<std::uint32_t>(id));
            }
            plan.where[source >> 32][source & 0xFFFFFFFFu] =
                RowPlan::Where{shard, static_cast<std::uint32_t>(part.pulls() - 1)};
        }
    }
    for (const auto& shard : plan.parts)
        for (std::size_t t = 0; t < tables.size(); ++t) {
            const auto& p = shard[t];
            const std::size_t most = std::max(p.grads(), p.pulls());
            if (most > wire::kMaxRowsPerFrame || p.grad_values.size() * sizeof(float) > 0xFFFFFFFFull ||
                most * tables[t].width * sizeof(float) > 0xFFFFFFFFull)
                return make_error(ErrorCode::kInvalidArgument, "too many rows of '" +
                                                                   options_.tensors[tables[t].tensor].name +
                                                                   "' for one exchange with one shard (at most " +
                                                                   std::to_string(wire::kMaxRowsPerFrame) +
                                                                   " ids and 4 GiB of values): split the batch");
        }
    return {};
}

void PsClient::add_row_frames(std::uint32_t shard, Header& header, std::vector<zmq::message_t>& payloads,
                              PayloadForm form, bool with_grads) {
    if (!rows_ || !rows_->any) return;
    auto& parts = rows_->parts[shard];
    for (std::size_t t = 0; t < parts.size(); ++t) {
        auto& p = parts[t];
        if (p.grads() == 0 || !with_grads) continue;
        const std::uint32_t tensor = layout_.tables[t].tensor;
        header.frames.push_back(FrameDesc{wire::row_frame_id(RowPart::kGradIds, tensor),
                                          static_cast<std::uint32_t>(p.grad_ids.size() * 4 + p.grad_keys.size() * 8)});
        if (p.grad_keys.empty())
            payloads.push_back(zero_copy_message(p.grad_ids.data(), p.grad_ids.size() * 4, holds_));
        else payloads.push_back(zero_copy_message(p.grad_keys.data(), p.grad_keys.size() * 8, holds_));
        if (form == PayloadForm::kBf16) p.grad_bf16.resize(p.grad_values.size());
        header.frames.push_back(FrameDesc{wire::row_frame_id(RowPart::kGradValues, tensor),
                                          static_cast<std::uint32_t>(p.grad_values.size() * value_bytes(form))});
        payloads.push_back(encode_frame(p.grad_values, form, p.grad_bf16.data(), holds_));
    }
    for (std::size_t t = 0; t < parts.size(); ++t) {
        const auto& p = parts[t];
        if (p.pulls() == 0) continue;
        if (rows_->lookup) header.flags |= wire::kFlagLookup;
        header.frames.push_back(FrameDesc{wire::row_frame_id(RowPart::kPullIds, layout_.tables[t].tensor),
                                          static_cast<std::uint32_t>(p.pull_ids.size() * 4 + p.pull_keys.size() * 8)});
        if (p.pull_keys.empty())
            payloads.push_back(zero_copy_message(p.pull_ids.data(), p.pull_ids.size() * 4, holds_));
        else payloads.push_back(zero_copy_message(p.pull_keys.data(), p.pull_keys.size() * 8, holds_));
    }
}

Result<void> PsClient::take_rows(std::uint32_t shard, Reply& reply, std::size_t first) {
    const std::string who = "ps " + std::to_string(shard);
    const std::size_t expected_frames = [&] {
        std::size_t n = 0;
        if (rows_ && rows_->any)
            for (const auto& p : rows_->parts[shard]) n += p.pulls() != 0;
        return n;
    }();
    if (reply.frames.size() != first + expected_frames)
        return make_error(ErrorCode::kProtocol, who + " answered " + std::to_string(reply.frames.size() - first) +
                                                    " row frames for " + std::to_string(expected_frames) +
                                                    " pulled tables");
    if (expected_frames == 0) return {};
    // psd sends rows in bf16 when the request asked for bf16 (never to a shared-memory connection).
    const PayloadForm form = (reply.header.flags & wire::kFlagBf16) ? PayloadForm::kBf16 : PayloadForm::kF32;
    std::size_t k = first;
    auto& parts = rows_->parts[shard];
    for (std::size_t t = 0; t < parts.size(); ++t) {
        auto& p = parts[t];
        if (p.pulls() == 0) continue;
        const std::size_t values = p.pulls() * layout_.tables[t].width;
        const auto& frame = reply.frames[k];
        if (reply.header.frames[k].id != wire::row_frame_id(RowPart::kValues, layout_.tables[t].tensor) ||
            frame.size() != values * value_bytes(form))
            return make_error(ErrorCode::kProtocol,
                              who + " sent wrong rows of '" + options_.tensors[layout_.tables[t].tensor].name + "'");
        p.pulled.resize(values);
        const auto decoded = decode_frame(frame, values, form, p.pulled.data());
        if (decoded.data() != p.pulled.data()) std::memcpy(p.pulled.data(), decoded.data(), values * sizeof(float));
        ++k;
    }
    return {};
}

void PsClient::finish_rows(PulledRows& out) const {
    const RowPlan& plan = *rows_;
    out.values_.resize(plan.where.size());
    for (std::size_t r = 0; r < plan.where.size(); ++r) {
        const std::size_t t = plan.request_tables[r];
        const std::size_t width = layout_.tables[t].width;
        auto& dst = out.values_[r];
        dst.resize(plan.where[r].size() * width);
        for (std::size_t i = 0; i < plan.where[r].size(); ++i) {
            const auto w = plan.where[r][i];
            std::memcpy(dst.data() + i * width, plan.parts[w.shard][t].pulled.data() + std::size_t{w.index} * width,
                        width * sizeof(float));
        }
    }
}

}  // namespace psrun
