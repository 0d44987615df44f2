#include "workerd/data/example_proto.h"

#include <bit>
#include <cstring>

namespace psrun::worker {
namespace {

enum WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kLength = 2, kFixed32 = 5 };

// A cursor over a message's bytes; every read checks the bytes left.
struct Reader {
    const std::uint8_t* p;
    const std::uint8_t* end;
    bool done() const { return p == end; }

    Result<std::uint64_t> varint() {
        std::uint64_t v = 0;
        for (int shift = 0; shift < 70; shift += 7) {
            if (p == end) return make_error(ErrorCode::kInvalidArgument, "truncated varint");
            const std::uint8_t b = *p++;
            if (shift == 63 && (b & 0x7e) != 0)
                return make_error(ErrorCode::kInvalidArgument, "varint longer than 64 bits");
            v |= std::uint64_t{b & 0x7fu} << shift;
            if ((b & 0x80) == 0) return v;
        }
        return make_error(ErrorCode::kInvalidArgument, "varint longer than 10 bytes");
    }
    Result<std::span<const std::uint8_t>> bytes(std::uint64_t n) {
        if (n > static_cast<std::uint64_t>(end - p))
            return make_error(ErrorCode::kInvalidArgument, "a field of " + std::to_string(n) +
                                                               " bytes runs past the end of its message (" +
                                                               std::to_string(end - p) + " bytes left)");
        std::span<const std::uint8_t> s(p, static_cast<std::size_t>(n));
        p += n;
        return s;
    }
    Result<std::span<const std::uint8_t>> length_delimited() {
        PSRUN_TRY_ASSIGN(auto n, varint());
        return bytes(n);
    }
    // Skips a field of `wire` type (its tag already read).
    Result<void> skip(std::uint32_t wire) {
        switch (wire) {
            case kVarint: return ignored(varint());
            case kFixed64: return ignored(bytes(8));
            case kLength: return ignored(length_delimited());
            case kFixed32: return ignored(bytes(4));
            default:
                return make_error(
                    ErrorCode::kInvalidArgument,
                    "wire type " + std::to_string(wire) + " (groups or invalid) is not used by tf.train.Example");
        }
    }
    template <class T>
    static Result<void> ignored(const Result<T>& read) {
        if (!read) return tl::unexpected(read.error());
        return {};
    }
    // The next tag as (field, wire type); field 0 is invalid.
    Result<std::pair<std::uint64_t, std::uint32_t>> tag() {
        PSRUN_TRY_ASSIGN(auto t, varint());
        if ((t >> 3) == 0) return make_error(ErrorCode::kInvalidArgument, "field number 0");
        return std::pair{t >> 3, static_cast<std::uint32_t>(t & 7)};
    }
};

Reader reader_of(std::span<const std::uint8_t> s) { return {s.data(), s.data() + s.size()}; }

// Calls take(field, wire type, reader) for every field of `msg`, the reader just past the tag;
// take returns Result<bool>: true when it read the field, false to have it skipped.
template <class Take>
Result<void> for_each_field(std::span<const std::uint8_t> msg, Take&& take) {
    Reader r = reader_of(msg);
    while (!r.done()) {
        PSRUN_TRY_ASSIGN(auto t, r.tag());
        PSRUN_TRY_ASSIGN(auto took, take(t.first, t.second, r));
        if (!took)
            if (auto ok = r.skip(t.second); !ok) return ok;
    }
    return {};
}

float float_at(const std::uint8_t* p) {
    std::uint32_t u =
        std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24;
    return std::bit_cast<float>(u);
}

Result<void> parse_bytes_list(std::span<const std::uint8_t> msg, FeatureValues& out) {
    return for_each_field(msg, [&](std::uint64_t field, std::uint32_t wire, Reader& r) -> Result<bool> {
        if (field != 1 || wire != kLength) return false;
        PSRUN_TRY_ASSIGN(auto v, r.length_delimited());
        out.bytes.push_back(v);
        return true;
    });
}

Result<void> parse_float_list(std::span<const std::uint8_t> msg, FeatureValues& out) {
    return for_each_field(msg, [&](std::uint64_t field, std::uint32_t wire, Reader& r) -> Result<bool> {
        if (field != 1 || (wire != kLength && wire != kFixed32)) return false;
        PSRUN_TRY_ASSIGN(auto v, wire == kLength ? r.length_delimited() : r.bytes(4));  // packed, or one value
        if (v.size() % 4 != 0)
            return make_error(ErrorCode::kInvalidArgument,
                              "a packed float_list of " + std::to_string(v.size()) + " bytes (not a multiple of 4)");
        for (std::size_t i = 0; i < v.size(); i += 4) out.floats.push_back(float_at(v.data() + i));
        return true;
    });
}

Result<void> parse_int64_list(std::span<const std::uint8_t> msg, FeatureValues& out) {
    auto take_varint = [&](Reader& r) -> Result<void> {
        PSRUN_TRY_ASSIGN(auto x, r.varint());
        out.ints.push_back(static_cast<std::int64_t>(x));
        return {};
    };
    return for_each_field(msg, [&](std::uint64_t field, std::uint32_t wire, Reader& r) -> Result<bool> {
        if (field != 1 || (wire != kLength && wire != kVarint)) return false;
        if (wire == kVarint) {
            PSRUN_TRY(take_varint(r));
            return true;
        }
        PSRUN_TRY_ASSIGN(auto v, r.length_delimited());  // packed
        for (Reader packed = reader_of(v); !packed.done();) PSRUN_TRY(take_varint(packed));
        return true;
    });
}

Result<void> parse_feature(std::span<const std::uint8_t> msg, FeatureValues& out) {
    out = FeatureValues{};
    return for_each_field(msg, [&](std::uint64_t field, std::uint32_t wire, Reader& r) -> Result<bool> {
        if (wire != kLength || field < 1 || field > 3) return false;
        PSRUN_TRY_ASSIGN(auto v, r.length_delimited());
        FeatureValues one;  // a later oneof member replaces an earlier one
        Result<void> ok;
        if (field == 1) {
            one.kind = FeatureKind::kBytes;
            ok = parse_bytes_list(v, one);
        } else if (field == 2) {
            one.kind = FeatureKind::kFloat;
            ok = parse_float_list(v, one);
        } else {
            one.kind = FeatureKind::kInt64;
            ok = parse_int64_list(v, one);
        }
        if (!ok) return tl::unexpected(ok.error());
        if (out.kind == one.kind) {  // the same list twice: protobuf merges them
            out.bytes.insert(out.bytes.end(), one.bytes.begin(), one.bytes.end());
            out.floats.insert(out.floats.end(), one.floats.begin(), one.floats.end());
            out.ints.insert(out.ints.end(), one.ints.begin(), one.ints.end());
        } else {
            out = std::move(one);
        }
        return true;
    });
}

// Calls visit(key, value message) for every map entry of every Features of `record`.
template <class Visit>
Result<void> for_each_entry(std::span<const std::uint8_t> record, Visit&& visit) {
    // Example { Features features = 1 } -> Features { map<string, Feature> feature = 1 } -> entry
    // { string key = 1; Feature value = 2 }: each level's field 1, length-delimited.
    auto nested = [](auto&& inner) {
        return [inner](std::uint64_t field, std::uint32_t wire, Reader& r) -> Result<bool> {
            if (field != 1 || wire != kLength) return false;
            PSRUN_TRY_ASSIGN(auto v, r.length_delimited());
            PSRUN_TRY(inner(v));
            return true;
        };
    };
    auto entry = [&](std::span<const std::uint8_t> bytes) -> Result<void> {
        std::span<const std::uint8_t> key, value;
        auto ok = for_each_field(bytes, [&](std::uint64_t field, std::uint32_t wire, Reader& r) -> Result<bool> {
            if ((field != 1 && field != 2) || wire != kLength) return false;
            PSRUN_TRY_ASSIGN(auto v, r.length_delimited());
            (field == 1 ? key : value) = v;
            return true;
        });
        if (!ok) return ok;
        return visit(key, value);
    };
    auto features = [&](std::span<const std::uint8_t> bytes) { return for_each_field(bytes, nested(entry)); };
    return for_each_field(record, nested(features));
}

void put_varint(std::vector<std::uint8_t>& out, std::uint64_t v) {
    while (v >= 0x80) {
        out.push_back(static_cast<std::uint8_t>(v | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<std::uint8_t>(v));
}

void put_length_field(std::vector<std::uint8_t>& out, std::uint32_t field, std::span<const std::uint8_t> bytes) {
    put_varint(out, (std::uint64_t{field} << 3) | kLength);
    put_varint(out, bytes.size());
    out.insert(out.end(), bytes.begin(), bytes.end());
}

std::span<const std::uint8_t> as_bytes(const std::string& s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// A map entry {key, Feature{list_field: list}}.
void put_entry(std::vector<std::uint8_t>& features, const std::string& key, std::uint32_t list_field,
               const std::vector<std::uint8_t>& list) {
    std::vector<std::uint8_t> feature, entry;
    put_length_field(feature, list_field, list);
    put_length_field(entry, 1, as_bytes(key));
    put_length_field(entry, 2, feature);
    put_length_field(features, 1, entry);
}

}  // namespace

const char* to_string(FeatureKind kind) {
    switch (kind) {
        case FeatureKind::kMissing: return "missing";
        case FeatureKind::kBytes: return "bytes_list";
        case FeatureKind::kFloat: return "float_list";
        case FeatureKind::kInt64: return "int64_list";
    }
    return "?";
}

std::size_t FeatureValues::size() const {
    switch (kind) {
        case FeatureKind::kBytes: return bytes.size();
        case FeatureKind::kFloat: return floats.size();
        case FeatureKind::kInt64: return ints.size();
        case FeatureKind::kMissing: break;
    }
    return 0;
}

Result<void> parse_example(std::span<const std::uint8_t> record, std::span<const std::string> keys,
                           std::span<FeatureValues> out) {
    for (auto& o : out) o = FeatureValues{};
    return for_each_entry(record, [&](std::span<const std::uint8_t> key, std::span<const std::uint8_t> value) {
        for (std::size_t i = 0; i < keys.size(); ++i) {
            if (key.size() == keys[i].size() && std::memcmp(key.data(), keys[i].data(), key.size()) == 0) {
                if (auto ok = parse_feature(value, out[i]); !ok) return ok;
            }
        }
        return Result<void>{};
    });
}

std::string describe_example_keys(std::span<const std::uint8_t> record) {
    std::string text;
    auto ok = for_each_entry(record, [&](std::span<const std::uint8_t> key, std::span<const std::uint8_t> value) {
        FeatureValues v;
        if (auto parsed = parse_feature(value, v); !parsed) return parsed;
        if (!text.empty()) text.append(", ");
        text.append("'").append(key.begin(), key.end()).append("' (").append(to_string(v.kind)).append(")");
        return Result<void>{};
    });
    return ok ? text : std::string();
}

ExampleBuilder& ExampleBuilder::add_bytes(const std::string& key, std::span<const std::uint8_t> value) {
    std::vector<std::uint8_t> list;
    put_length_field(list, 1, value);
    put_entry(features_, key, 1, list);
    return *this;
}

ExampleBuilder& ExampleBuilder::add_floats(const std::string& key, std::span<const float> values) {
    std::vector<std::uint8_t> packed, list;
    for (float v : values) {
        const auto u = std::bit_cast<std::uint32_t>(v);
        for (int i = 0; i < 4; ++i) packed.push_back(static_cast<std::uint8_t>(u >> (8 * i)));
    }
    put_length_field(list, 1, packed);
    put_entry(features_, key, 2, list);
    return *this;
}

ExampleBuilder& ExampleBuilder::add_int64s(const std::string& key, std::span<const std::int64_t> values) {
    std::vector<std::uint8_t> packed, list;
    for (std::int64_t v : values) put_varint(packed, static_cast<std::uint64_t>(v));
    put_length_field(list, 1, packed);
    put_entry(features_, key, 3, list);
    return *this;
}

std::vector<std::uint8_t> ExampleBuilder::serialize() const {
    std::vector<std::uint8_t> out;
    put_length_field(out, 1, features_);
    return out;
}

}  // namespace psrun::worker
