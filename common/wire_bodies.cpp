// The bodies of the protocol's messages (docs/protocol.md "Messages"): tensors, HELLO, WELCOME,
// INIT, ERROR, SAVE, RESTORE, DIRCHECK. Header and frame checks are in common/wire.cpp.
#include "common/wire.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/coding.h"

namespace psrun::wire {
namespace {

constexpr std::uint32_t kMaxRank = 8;

}  // namespace

std::string encode_tensors(const std::vector<TensorSpec>& tensors) {
    std::string out;
    put_fixed32(out, static_cast<std::uint32_t>(tensors.size()));
    for (const auto& t : tensors) {
        put_string16(out, t.name);
        put_fixed8(out, static_cast<std::uint8_t>(t.shape.size()));
        for (auto dim : t.shape) put_fixed32(out, dim);
        put_fixed8(out, static_cast<std::uint8_t>(t.tensor_class));
        put_fixed8(out, static_cast<std::uint8_t>(t.kind));
        if (t.rows()) {
            put_fixed8(out, static_cast<std::uint8_t>(t.row_init.kind));
            put_float(out, t.row_init.scale);
            put_fixed64(out, t.row_init.seed);
        }
        if (t.keyed()) {
            put_fixed32(out, t.row_policy.admit_after);
            put_float(out, t.row_policy.admit_probability);
            put_fixed64(out, t.row_policy.evict_after);
        }
    }
    return out;
}

Result<std::vector<TensorSpec>> decode_tensors(std::string_view bytes) {
    Decoder d(bytes);
    std::uint32_t n = 0;
    if (!d.get32(n) || n == 0 || n > kMaxTensors) return protocol_error("bad tensor count");
    std::vector<TensorSpec> out(n);
    for (auto& t : out) {
        std::uint8_t rank = 0;
        if (!d.get_string16(t.name) || !d.get8(rank) || rank == 0 || rank > kMaxRank)
            return protocol_error("bad tensor entry");
        t.shape.resize(rank);
        std::uint64_t elements = 1;
        for (auto& dim : t.shape) {
            if (!d.get32(dim) || dim == 0) return protocol_error("bad tensor dimension");
            if (elements > kMaxRowsElements / dim) return protocol_error("tensor '" + t.name + "' is too large");
            elements *= dim;
        }
        std::uint8_t cls = 0, kind = 0;
        if (!d.get8(cls) || !d.get8(kind)) return protocol_error("truncated tensor entry");
        if (cls > static_cast<std::uint8_t>(TensorClass::kState))
            return protocol_error("tensor '" + t.name + "' has an unknown class");
        if (kind > static_cast<std::uint8_t>(TensorKind::kKeyedRows))
            return protocol_error("tensor '" + t.name + "' has an unknown kind");
        t.tensor_class = static_cast<TensorClass>(cls);
        t.kind = static_cast<TensorKind>(kind);
        if (!t.rows()) {
            if (elements > kMaxDenseElements) return protocol_error("tensor '" + t.name + "' is too large");
            continue;
        }
        std::uint8_t init = 0;
        if (!d.get8(init) || !d.get_float(t.row_init.scale) || !d.get64(t.row_init.seed))
            return protocol_error("truncated row initializer");
        if (init > kMaxRowInitKind) return protocol_error("tensor '" + t.name + "' has an unknown row initializer");
        t.row_init.kind = static_cast<RowInitKind>(init);
        if (!std::isfinite(t.row_init.scale) || t.row_init.scale < 0.0f)
            return protocol_error("tensor '" + t.name + "': row initializer scale must be finite and >= 0");
        if (rank != 2 || t.shape[1] > kMaxRowWidth)
            return protocol_error("rows tensor '" + t.name +
                                  "' must have shape [num_rows, width] with width <= " + std::to_string(kMaxRowWidth));
        if (t.state()) return protocol_error("rows tensor '" + t.name + "' cannot be a state tensor");
        if (!t.keyed()) continue;
        auto& p = t.row_policy;
        if (!d.get32(p.admit_after) || !d.get_float(p.admit_probability) || !d.get64(p.evict_after))
            return protocol_error("truncated row policy of keyed table '" + t.name + "'");
        if (p.admit_after == 0 || p.admit_after > kMaxAdmitAfter)
            return protocol_error("keyed table '" + t.name + "': admit_after must be 1.." +
                                  std::to_string(kMaxAdmitAfter));
        if (p.evict_after > kMaxEvictAfter)
            return protocol_error("keyed table '" + t.name + "': evict_after must be 0.." +
                                  std::to_string(kMaxEvictAfter));
        if (!(p.admit_probability > 0.0f && p.admit_probability <= 1.0f))
            return protocol_error("keyed table '" + t.name + "': admit_probability must be in (0, 1]");
    }
    if (d.remaining() != 0) return protocol_error("trailing bytes after tensor list");
    return out;
}

std::string encode_hello(const Hello& hello) {
    std::string out;
    put_string16(out, hello.model.name);
    put_string16(out, hello.model.hash);
    return out + encode_tensors(hello.tensors);
}

Result<Hello> decode_hello(std::string_view bytes) {
    Decoder d(bytes);
    Hello out;
    if (!d.get_string16(out.model.name) || !d.get_string16(out.model.hash))
        return protocol_error("truncated HELLO model");
    if (out.model.name.empty() || out.model.name.size() > kMaxModelNameBytes)
        return protocol_error("bad HELLO model name");
    const bool hex = std::all_of(out.model.hash.begin(), out.model.hash.end(),
                                 [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
    if (!(out.model.hash.empty() || (out.model.hash.size() == 64 && hex)))
        return protocol_error("bad HELLO model hash");
    PSRUN_TRY_ASSIGN(auto tensors, decode_tensors(bytes.substr(bytes.size() - d.remaining())));
    out.tensors = std::move(tensors);
    return out;
}

std::string encode_welcome(const Welcome& w) {
    std::string out;
    put_fixed32(out, w.shard);
    put_fixed32(out, w.layout.num_shards);
    put_fixed64(out, w.layout.total);
    put_fixed32(out, static_cast<std::uint32_t>(w.layout.slices.size()));
    for (const auto& s : w.layout.slices) {
        put_fixed32(out, s.tensor);
        put_fixed64(out, s.offset);
        put_fixed64(out, s.length);
        put_fixed32(out, s.shard);
        put_fixed64(out, s.flat_offset);
    }
    put_fixed64(out, w.instance);
    put_fixed32(out, static_cast<std::uint32_t>(w.layout.tables.size()));
    for (const auto& t : w.layout.tables) {
        put_fixed32(out, t.tensor);
        put_fixed64(out, t.num_rows);
        put_fixed32(out, t.width);
        put_fixed8(out, t.keyed ? 1 : 0);
        put_fixed32(out, t.home);
    }
    return out;
}

Result<Welcome> decode_welcome(std::string_view bytes) {
    Decoder d(bytes);
    Welcome w;
    std::uint32_t n = 0;
    std::uint64_t total = 0;
    if (!d.get32(w.shard) || !d.get32(w.layout.num_shards) || !d.get64(total) || !d.get32(n) || n > kMaxFrames ||
        w.layout.num_shards == 0 || w.shard >= w.layout.num_shards)
        return protocol_error("bad WELCOME body");
    w.layout.total = total;
    w.layout.slices.resize(n);
    for (auto& s : w.layout.slices)
        if (!d.get32(s.tensor) || !d.get64(s.offset) || !d.get64(s.length) || !d.get32(s.shard) ||
            !d.get64(s.flat_offset))
            return protocol_error("truncated WELCOME layout");
    if (!d.get64(w.instance) || w.instance == 0) return protocol_error("WELCOME without the psd's instance");
    std::uint32_t tables = 0;
    if (!d.get32(tables) || tables > kMaxTensors) return protocol_error("bad WELCOME table count");
    w.layout.tables.resize(tables);
    for (auto& t : w.layout.tables) {
        std::uint8_t keyed = 0;
        if (!d.get32(t.tensor) || !d.get64(t.num_rows) || !d.get32(t.width) || !d.get8(keyed) || !d.get32(t.home))
            return protocol_error("truncated WELCOME tables");
        if (keyed > 1) return protocol_error("bad WELCOME table kind");
        if (t.whole() && t.home >= w.layout.num_shards) return protocol_error("bad WELCOME table placement");
        t.keyed = keyed == 1;
    }
    if (d.remaining() != 0) return protocol_error("trailing bytes after WELCOME layout");
    return w;
}

std::string encode_init(const InitConfig& init) {
    std::string out;
    const auto& o = init.optimizer;
    put_fixed8(out, static_cast<std::uint8_t>(o.kind));
    put_float(out, o.learning_rate);
    put_float(out, o.momentum);
    put_float(out, o.beta1);
    put_float(out, o.beta2);
    put_float(out, o.epsilon);
    put_float(out, o.adagrad_initial);
    put_float(out, o.decay_rate);
    put_fixed64(out, o.decay_steps);
    put_fixed64(out, init.start_step);
    put_fixed64(out, init.last_step);
    put_lr_schedule(out, o.schedule);
    put_float(out, o.weight_decay);
    put_fixed8(out, static_cast<std::uint8_t>(o.weight_decay_on));
    put_float(out, o.clip_global_norm);
    put_float(out, o.ema_decay);
    put_fixed16(out, static_cast<std::uint16_t>(o.groups.size()));
    for (const auto& g : o.groups) {
        put_string16(out, g.pattern);
        put_float(out, g.lr_multiplier);
        put_fixed8(out, g.sets_weight_decay ? 1 : 0);
        put_float(out, g.weight_decay);
    }
    return out;
}

// The init fields at the front of `d` (INIT and RESTORE bodies), validated.
static Result<InitConfig> read_init(Decoder& d) {
    InitConfig init;
    auto& o = init.optimizer;
    std::uint8_t kind = 0;
    if (!d.get8(kind) || !d.get_float(o.learning_rate) || !d.get_float(o.momentum) || !d.get_float(o.beta1) ||
        !d.get_float(o.beta2) || !d.get_float(o.epsilon) || !d.get_float(o.adagrad_initial) ||
        !d.get_float(o.decay_rate) || !d.get64(o.decay_steps) || !d.get64(init.start_step) || !d.get64(init.last_step))
        return protocol_error("bad INIT body size");
    auto schedule = read_lr_schedule(d);
    if (!schedule) return protocol_error("INIT " + schedule.error().message);
    o.schedule = std::move(*schedule);
    std::uint8_t decay_on = 0;
    if (!d.get_float(o.weight_decay) || !d.get8(decay_on) || !d.get_float(o.clip_global_norm) ||
        !d.get_float(o.ema_decay))
        return protocol_error("bad INIT body size");
    if (decay_on > static_cast<std::uint8_t>(WeightDecayOn::kAll))
        return protocol_error("unknown INIT weight decay selection");
    std::uint16_t groups = 0;
    if (!d.get16(groups) || groups > kMaxParamGroups) return protocol_error("bad INIT parameter group count");
    o.groups.resize(groups);
    for (auto& g : o.groups) {
        std::uint8_t sets = 0;
        if (!d.get_string16(g.pattern) || !d.get_float(g.lr_multiplier) || !d.get8(sets) ||
            !d.get_float(g.weight_decay))
            return protocol_error("truncated INIT parameter group");
        if (g.pattern.empty() || sets > 1 || !std::isfinite(g.lr_multiplier) || g.lr_multiplier < 0.0f ||
            !std::isfinite(g.weight_decay) || g.weight_decay < 0.0f)
            return protocol_error("INIT parameter group out of range");
        g.sets_weight_decay = sets == 1;
    }
    o.weight_decay_on = static_cast<WeightDecayOn>(decay_on);
    if (kind > kMaxOptimizerKind) return protocol_error("unknown optimizer kind");
    o.kind = static_cast<OptimizerKind>(kind);
    for (float v : {o.learning_rate, o.momentum, o.beta1, o.beta2, o.epsilon, o.adagrad_initial, o.decay_rate,
                    o.weight_decay, o.clip_global_norm, o.ema_decay})
        if (!std::isfinite(v) || v < 0.0f) return protocol_error("INIT optimizer parameter is negative or not finite");
    if (o.learning_rate <= 0.0f || o.momentum >= 1.0f || o.epsilon <= 0.0f || o.beta1 >= 1.0f || o.beta2 >= 1.0f ||
        o.ema_decay >= 1.0f || o.decay_rate <= 0.0f || o.decay_rate > 1.0f)
        return protocol_error("INIT optimizer parameters out of range");
    if (o.kind == OptimizerKind::kAdagrad && o.adagrad_initial <= 0.0f)
        return protocol_error("INIT adagrad initial accumulator must be positive");
    if (o.schedule.kind != LrScheduleKind::kConstant && o.decay_steps != 0 && o.decay_rate != 1.0f)
        return protocol_error("INIT carries both an exponential decay and a learning-rate schedule");
    if (init.last_step != 0 && init.start_step > init.last_step)
        return protocol_error("INIT start step beyond last step");
    return init;
}

Result<InitConfig> decode_init(std::string_view bytes) {
    Decoder d(bytes);
    auto init = read_init(d);
    if (init && d.remaining() != 0) return protocol_error("trailing bytes after INIT body");
    return init;
}

std::string encode_error(const ErrorBody& e) {
    std::string out;
    put_fixed16(out, static_cast<std::uint16_t>(e.code));
    put_string16(out, e.reason);
    return out;
}

Result<ErrorBody> decode_error(std::string_view bytes) {
    Decoder d(bytes);
    std::uint16_t code = 0;
    ErrorBody e;
    if (!d.get16(code) || !d.get_string16(e.reason) || d.remaining() != 0) return protocol_error("bad ERROR body");
    if (code > static_cast<std::uint16_t>(kLastErrorCode)) code = static_cast<std::uint16_t>(ErrorCode::kProtocol);
    e.code = static_cast<ErrorCode>(code);
    return e;
}

Result<void> check_path(std::string_view path) {
    if (path.empty() || path.size() > kMaxPathBytes)
        return protocol_error("checkpoint path must have 1.." + std::to_string(kMaxPathBytes) + " bytes");
    if (path.find('\0') != std::string_view::npos) return protocol_error("checkpoint path contains a NUL byte");
    if (path.front() != '/') return protocol_error("checkpoint path '" + std::string(path) + "' is not absolute");
    return {};
}

std::string encode_save(const std::string& dir) {
    std::string out;
    put_string16(out, dir);
    return out;
}

Result<std::string> decode_save(std::string_view bytes) {
    Decoder d(bytes);
    std::string dir;
    if (!d.get_string16(dir) || d.remaining() != 0) return protocol_error("bad SAVE body");
    PSRUN_TRY(check_path(dir));
    return dir;
}

std::string encode_restore(const RestoreRequest& request) {
    std::string out = encode_init(request.init);
    put_string16(out, request.dir);
    return out;
}

Result<RestoreRequest> decode_restore(std::string_view bytes) {
    Decoder d(bytes);
    RestoreRequest r;
    PSRUN_TRY_ASSIGN(auto init, read_init(d));
    r.init = std::move(init);
    if (!d.get_string16(r.dir) || d.remaining() != 0) return protocol_error("bad RESTORE body");
    PSRUN_TRY(check_path(r.dir));
    return r;
}

std::string encode_dircheck(const DirCheckRequest& request) {
    std::string out;
    put_string16(out, request.dir);
    put_string16(out, request.nonce);
    return out;
}

Result<DirCheckRequest> decode_dircheck(std::string_view bytes) {
    Decoder d(bytes);
    DirCheckRequest r;
    if (!d.get_string16(r.dir) || !d.get_string16(r.nonce) || d.remaining() != 0)
        return protocol_error("bad DIRCHECK body");
    PSRUN_TRY(check_path(r.dir));
    if (r.nonce.size() < 16 || r.nonce.size() > 64 ||
        r.nonce.find_first_not_of("0123456789abcdef") != std::string::npos)
        return protocol_error("DIRCHECK nonce must be 16..64 lowercase hex digits");
    return r;
}

}  // namespace psrun::wire
