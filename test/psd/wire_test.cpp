#include "common/wire.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "common/coding.h"

using namespace psrun;
using namespace psrun::wire;

namespace {

Header sample_header() {
    Header h;
    h.type = MessageType::kPushPull;
    h.role = Role::kChief;
    h.token = 0x0123456789abcdefull;
    h.index = 3;
    h.flags = kFlagStale;
    h.step = 42;
    h.frames = {{0, 3200}, {1, 128}, {kBodyFrame, 12}};
    return h;
}

// Overwrites one field. Field checks run before the CRC check, so the field's error is reported.
std::string patch(std::string bytes, std::size_t offset, const void* value, std::size_t n) {
    std::memcpy(bytes.data() + offset, value, n);
    return bytes;
}

}  // namespace

TEST_CASE("header round trip keeps every field", "[wire]") {
    const Header h = sample_header();
    const std::string bytes = encode_header(h);
    CHECK(bytes.size() == kFixedHeaderSize + 3 * kFrameDescriptorSize);
    auto back = decode_header(bytes);
    REQUIRE(back);
    CHECK(*back == h);
}

TEST_CASE("header decoder rejects every malformed field", "[wire]") {
    const std::string good = encode_header(sample_header());
    auto rejects = [](const std::string& bytes, const std::string& words) {
        auto r = decode_header(bytes);
        REQUIRE_FALSE(r);
        CHECK(r.error().code == ErrorCode::kProtocol);
        CHECK_THAT(r.error().message, Catch::Contains(words));
    };
    rejects(good.substr(0, 47), "at least 48");
    rejects("", "at least 48");
    std::uint32_t magic = 0x11223344;
    rejects(patch(good, 0, &magic, 4), "magic");
    std::uint16_t version = 1;
    rejects(patch(good, 4, &version, 2), "protocol version 1");
    std::uint8_t type = 0;
    rejects(patch(good, 6, &type, 1), "unknown message type 0");
    type = kMaxMessageType + 1;
    rejects(patch(good, 6, &type, 1), "unknown message type");
    std::uint8_t role = kMaxRole + 1;
    rejects(patch(good, 7, &role, 1), "unknown sender role");
    std::uint32_t flags = 1u << 20;
    rejects(patch(good, 20, &flags, 4), "unknown header flags");
    std::uint64_t aux = 1;
    rejects(patch(good, 32, &aux, 8), "header field 'aux' is not zero");
    {  // REJOINED (issue 14): a ps reply may carry its --worker-timeout in aux; nobody else may
        Header r;
        r.type = MessageType::kParams;
        r.role = Role::kPs;
        r.flags = kFlagRejoined;
        r.aux = 5000;
        auto back = decode_header(encode_header(r));
        REQUIRE(back);
        CHECK(back->aux == 5000);
        r.role = Role::kWorker;
        CHECK_FALSE(decode_header(encode_header(r)));
    }
    std::uint32_t count = kMaxFrames + 1;
    rejects(patch(good, 40, &count, 4), "too many payload frames");
    count = 2;
    rejects(patch(good, 40, &count, 4), "does not match its frame count");
    rejects(good + "12345678", "does not match its frame count");
    // A flipped bit in any covered field (token, index, step, descriptors) breaks the CRC.
    for (std::size_t offset : {8u, 16u, 24u, 48u, 60u}) {
        std::string bad = good;
        bad[offset] ^= 0x01;
        rejects(bad, "checksum");
    }
    Header big = sample_header();
    big.frames = {{kBodyFrame, kMaxBodyBytes + 1}};
    rejects(encode_header(big), "body frame too large");
}

TEST_CASE("row frame ids: well-formed ones pass, others are refused; SHM messages carry row frames only",
          "[wire][sparse]") {
    auto rejects = [](const Header& h, const std::string& words) {
        auto r = decode_header(encode_header(h));
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains(words));
    };
    Header h = sample_header();
    h.frames = {{0, 3200},
                {row_frame_id(RowPart::kGradIds, 7), 8},
                {row_frame_id(RowPart::kGradValues, 7), 64},
                {row_frame_id(RowPart::kPullIds, 9), 4}};
    auto ok = decode_header(encode_header(h));
    REQUIRE(ok);
    CHECK(*ok == h);
    CHECK(dense_frame_count(*ok) == 1);
    CHECK(is_row_frame(h.frames[1].id));
    CHECK_FALSE(is_row_frame(kBodyFrame));
    CHECK(row_part(h.frames[3].id) == RowPart::kPullIds);
    CHECK(row_tensor(h.frames[3].id) == 9);
    Header bad = h;
    bad.frames[1].id = kRowFrame | (4u << 16);  // part 4
    rejects(bad, "bad row frame id");
    bad.frames[1].id = kRowFrame | 4096;  // tensor beyond the list's limit
    rejects(bad, "bad row frame id");
    bad.frames[1].id = kRowFrame | (1u << 24);
    rejects(bad, "bad row frame id");
    Header shm = h;
    shm.flags = kFlagShm;
    shm.aux = 1;
    shm.frames.erase(shm.frames.begin());
    CHECK(decode_header(encode_header(shm)));  // the dense part in the segment, rows as frames
    shm.frames.push_back({kBodyFrame, 4});
    rejects(shm, "row frames only");
}

TEST_CASE("WELCOME carries the sparse tables; layouts leave rows tensors out of the dense buffer", "[wire][sparse]") {
    std::vector<TensorSpec> tensors = {{"a", {5000}}, {"emb", {1001, 16}}, {"b", {3000}}};
    tensors[1].kind = TensorKind::kRows;
    auto layout = compute_layout(tensors, 3);
    REQUIRE(layout);
    CHECK(layout->total == 8000);
    REQUIRE(layout->tables.size() == 1);
    CHECK(layout->tables[0] == RowTable{1, 1001, 16});
    CHECK(layout->table_of(1) == 0);
    CHECK(layout->table_of(0) == -1);
    for (const auto& s : layout->slices) CHECK(s.tensor != 1);
    CHECK(layout->tables[0].rows_on(0, 3) == 334);
    CHECK(layout->tables[0].rows_on(2, 3) == 333);
    CHECK(row_owner(1000, 3) == 1);
    CHECK(row_index(1000, 3) == 333);
    CHECK(validate_layout(*layout, tensors));
    auto no_tables = *layout;
    no_tables.tables.clear();
    CHECK_FALSE(validate_layout(no_tables, tensors));
    const std::string wb = encode_welcome(Welcome{1, *layout, 99});
    auto w = decode_welcome(wb);
    REQUIRE(w);
    CHECK(w->instance == 99);
    CHECK(w->layout == *layout);
    for (std::size_t n = 0; n < wb.size(); ++n) CHECK_FALSE(decode_welcome(wb.substr(0, n)));
    // Only tables: an empty dense buffer.
    auto only = compute_layout({tensors[1]}, 2);
    REQUIRE(only);
    CHECK(only->total == 0);
    CHECK(only->slices.empty());
}

TEST_CASE("payload frames must match their descriptors", "[wire]") {
    const Header h = sample_header();
    std::vector<std::size_t> sizes{3200, 128, 12};
    CHECK(check_frames(h, sizes));
    sizes.pop_back();
    CHECK_FALSE(check_frames(h, sizes));
    sizes = {3200, 124, 12};
    auto r = check_frames(h, sizes);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("payload frame 1 has 124 bytes"));
}

TEST_CASE("tensor class, kind and row initializer travel in the tensor list", "[wire]") {
    std::vector<TensorSpec> tensors = {{"fc/w", {10, 4}}, {"bn/mean", {10}}, {"emb", {1000000, 16}}};
    tensors[1].tensor_class = TensorClass::kState;
    tensors[2].kind = TensorKind::kRows;
    tensors[2].row_init = RowInit{RowInitKind::kTruncatedNormal, 0.05f, 0x1234567890abcdefull};
    const std::string bytes = encode_tensors(tensors);
    auto t = decode_tensors(bytes);
    REQUIRE(t);
    CHECK(*t == tensors);
    CHECK((*t)[1].state());
    CHECK((*t)[2].rows());
    CHECK((*t)[2].row_init.seed == 0x1234567890abcdefull);
    for (std::size_t n = 0; n < bytes.size(); ++n) CHECK_FALSE(decode_tensors(bytes.substr(0, n)));
    auto hello = decode_hello(encode_hello(Hello{{"m", ""}, tensors}));
    REQUIRE(hello);
    CHECK(hello->tensors == tensors);

    // The class and kind take part in the fingerprint; plain trainable dense lists keep theirs.
    auto trainable = tensors;
    trainable[1].tensor_class = TensorClass::kTrainable;
    CHECK(tensors_fingerprint(trainable) != tensors_fingerprint(tensors));
    auto reseeded = tensors;
    reseeded[2].row_init.seed += 1;
    CHECK(tensors_fingerprint(reseeded) != tensors_fingerprint(tensors));
    CHECK(tensors_fingerprint(mnist_deep_tensors()) == 0x8595c4c2bb22757aull);

    auto rejects_tensor = [](std::vector<TensorSpec> list, const std::string& what) {
        auto r = decode_tensors(encode_tensors(list));
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains(what));
    };
    auto bad_class = tensors;
    bad_class[0].tensor_class = static_cast<TensorClass>(2);
    rejects_tensor(bad_class, "unknown class");
    auto bad_kind = tensors;
    bad_kind[0].kind = static_cast<TensorKind>(3);
    rejects_tensor(bad_kind, "unknown kind");
    auto bad_init = tensors;
    bad_init[2].row_init.kind = static_cast<RowInitKind>(9);
    rejects_tensor(bad_init, "unknown row initializer");
    bad_init[2].row_init = RowInit{RowInitKind::kNormal, -1.0f, 0};
    rejects_tensor(bad_init, "scale");
    bad_init[2].row_init.scale = std::numeric_limits<float>::quiet_NaN();
    rejects_tensor(bad_init, "scale");
    auto state_rows = tensors;
    state_rows[2].tensor_class = TensorClass::kState;
    rejects_tensor(state_rows, "cannot be a state tensor");
    auto rank3 = tensors;
    rank3[2].shape = {10, 4, 4};
    rejects_tensor(rank3, "[num_rows, width]");
    auto wide = tensors;
    wide[2].shape = {10, kMaxRowWidth + 1};
    rejects_tensor(wide, "[num_rows, width]");
    auto huge_dense = std::vector<TensorSpec>{{"w", {65536, 65537}}};
    rejects_tensor(huge_dense, "too large");
    auto huge_rows = tensors;
    huge_rows[2].shape = {0xFFFFFFFFu, 65536};  // 2^48 floats: over the rows limit
    rejects_tensor(huge_rows, "too large");
    auto big_rows = tensors;
    big_rows[2].shape = {0xFFFFFFFFu, 64};  // 2^38 floats: a rows tensor may exceed the dense limit
    CHECK(decode_tensors(encode_tensors(big_rows)));
}

TEST_CASE("bodies round trip and reject truncation", "[wire]") {
    const auto tensors = mnist_deep_tensors();
    auto t = decode_tensors(encode_tensors(tensors));
    REQUIRE(t);
    CHECK(*t == tensors);
    const std::string tb = encode_tensors(tensors);
    for (std::size_t n = 0; n < tb.size(); n += 7) CHECK_FALSE(decode_tensors(tb.substr(0, n)));
    CHECK_FALSE(decode_tensors(tb + "x"));

    const std::string hash(64, 'c');
    const std::string hb = encode_hello(Hello{{"mnist_deep", hash}, tensors});
    auto hello = decode_hello(hb);
    REQUIRE(hello);
    CHECK(hello->model == ModelId{"mnist_deep", hash});
    CHECK(hello->tensors == tensors);
    for (std::size_t n = 0; n < hb.size(); n += 7) CHECK_FALSE(decode_hello(hb.substr(0, n)));
    CHECK(decode_hello(encode_hello(Hello{{"tool", ""}, tensors})));        // a tool names no hash
    CHECK_FALSE(decode_hello(encode_hello(Hello{{"", hash}, tensors})));    // a name is required
    CHECK_FALSE(decode_hello(encode_hello(Hello{{"m", "ABC"}, tensors})));  // not 64 hex digits
    CHECK_FALSE(decode_hello(encode_hello(Hello{{"m", std::string(64, 'G')}, tensors})));
    CHECK_FALSE(decode_hello(encode_hello(Hello{{std::string(256, 'n'), hash}, tensors})));

    auto layout = compute_layout(tensors, 3);
    REQUIRE(layout);
    const std::string wb = encode_welcome(Welcome{2, *layout, 0x1234abcd5678ef90ULL});
    auto w = decode_welcome(wb);
    REQUIRE(w);
    CHECK(w->shard == 2);
    CHECK(w->layout == *layout);
    CHECK(w->instance == 0x1234abcd5678ef90ULL);
    CHECK_FALSE(decode_welcome(wb.substr(0, wb.size() - 1)));
    CHECK_FALSE(decode_welcome(wb + '\0'));
    CHECK_FALSE(decode_welcome(encode_welcome(Welcome{3, *layout, 7})));  // shard index out of range
    CHECK_FALSE(decode_welcome(encode_welcome(Welcome{2, *layout, 0})));  // no instance

    InitConfig init;
    init.optimizer = OptimizerConfig{.kind = OptimizerKind::kMomentum, .learning_rate = 0.5f, .momentum = 0.8f};
    init.optimizer.decay_rate = 0.25f;
    init.optimizer.decay_steps = 3000;
    init.start_step = 10;
    init.last_step = 100;
    auto i = decode_init(encode_init(init));
    REQUIRE(i);
    CHECK(i->optimizer.kind == OptimizerKind::kMomentum);
    CHECK(i->optimizer.learning_rate == 0.5f);
    CHECK(i->optimizer.momentum == 0.8f);
    CHECK(i->optimizer.decay_rate == 0.25f);
    CHECK(i->optimizer.decay_steps == 3000);
    CHECK(i->last_step == 100);
    for (float rate : {0.0f, 1.5f, -0.5f}) {
        InitConfig bad_decay = init;
        bad_decay.optimizer.decay_rate = rate;
        CHECK_FALSE(decode_init(encode_init(bad_decay)));
    }
    InitConfig bad = init;
    bad.optimizer.learning_rate = std::numeric_limits<float>::quiet_NaN();
    CHECK_FALSE(decode_init(encode_init(bad)));
    bad = init;
    bad.optimizer.beta2 = 1.5f;
    CHECK_FALSE(decode_init(encode_init(bad)));
    bad = init;
    bad.start_step = 200;
    CHECK_FALSE(decode_init(encode_init(bad)));
    std::string kind = encode_init(init);
    kind[0] = 9;
    CHECK_FALSE(decode_init(kind));

    auto e = decode_error(encode_error(ErrorBody{ErrorCode::kUnauthorized, "wrong token"}));
    REQUIRE(e);
    CHECK(e->code == ErrorCode::kUnauthorized);
    CHECK(e->reason == "wrong token");
}

TEST_CASE("SAVE and RESTORE bodies round trip and reject bad paths", "[wire]") {
    auto dir = decode_save(encode_save("/models/run1/.ckpt-0000000010.tmp.42"));
    REQUIRE(dir);
    CHECK(*dir == "/models/run1/.ckpt-0000000010.tmp.42");
    InitConfig init;
    init.optimizer.kind = OptimizerKind::kMomentum;
    init.start_step = 10;
    init.last_step = 20;
    auto r = decode_restore(encode_restore(RestoreRequest{init, "/m/ckpt-0000000010"}));
    REQUIRE(r);
    CHECK(r->dir == "/m/ckpt-0000000010");
    CHECK(r->init.optimizer.kind == OptimizerKind::kMomentum);
    CHECK(r->init.start_step == 10);
    CHECK(r->init.last_step == 20);

    auto rejects = [](const Result<std::string>& result, const std::string& words) {
        REQUIRE_FALSE(result);
        CHECK(result.error().code == ErrorCode::kProtocol);
        CHECK_THAT(result.error().message, Catch::Contains(words));
    };
    rejects(decode_save(encode_save("relative/dir")), "not absolute");
    rejects(decode_save(encode_save("")), "bytes");
    rejects(decode_save(encode_save(std::string("/a\0b", 4))), "NUL");
    rejects(decode_save(encode_save("/" + std::string(kMaxPathBytes, 'x'))), "bytes");
    rejects(decode_save(encode_save("/ok") + "x"), "bad SAVE body");
    rejects(decode_save(encode_save("/ok").substr(0, 3)), "bad SAVE body");
    CHECK_FALSE(decode_restore(encode_init(init)));  // no path
    CHECK_FALSE(decode_restore(encode_restore(RestoreRequest{init, "rel"})));
    init.start_step = 30;  // beyond last_step
    CHECK_FALSE(decode_restore(encode_restore(RestoreRequest{init, "/m"})));
}

TEST_CASE("finite check finds NaN and Inf anywhere", "[wire]") {
    std::vector<float> v(1000, 1.0f);
    CHECK(all_finite(v.data(), v.size()));
    v[999] = std::numeric_limits<float>::infinity();
    CHECK_FALSE(all_finite(v.data(), v.size()));
    v[999] = 1.0f;
    v[3] = -std::numeric_limits<float>::quiet_NaN();
    CHECK_FALSE(all_finite(v.data(), v.size()));
    v[3] = std::numeric_limits<float>::max();
    CHECK(all_finite(v.data(), v.size()));
}

TEST_CASE("random and mutated frames never crash the decoders", "[wire][fuzz]") {
    std::mt19937 rng(1234);
    const std::string good = encode_header(sample_header());
    const std::string bodies[] = {encode_hello(Hello{{"mnist_deep", std::string(64, 'a')}, mnist_deep_tensors()}),
                                  encode_welcome(Welcome{0, *compute_layout(mnist_deep_tensors(), 2), 42}),
                                  encode_init(InitConfig{}), encode_error(ErrorBody{ErrorCode::kIo, "x"})};
    int header_accepted = 0;
    for (int iter = 0; iter < 20000; ++iter) {
        std::string bytes = (iter % 2) ? good : bodies[iter % 4];
        const int mutations = 1 + static_cast<int>(rng() % 4);
        for (int m = 0; m < mutations; ++m) {
            switch (rng() % 3) {
                case 0: bytes[rng() % bytes.size()] = static_cast<char>(rng()); break;
                case 1: bytes.resize(rng() % (bytes.size() + 1)); break;
                default: bytes.push_back(static_cast<char>(rng())); break;
            }
            if (bytes.empty()) bytes.push_back('\0');
        }
        auto h = decode_header(bytes);
        if (h) {
            ++header_accepted;
            CHECK(h->frames.size() <= kMaxFrames);
        }
        (void)decode_tensors(bytes);
        (void)decode_welcome(bytes);
        (void)decode_init(bytes);
        (void)decode_error(bytes);
        (void)decode_save(bytes);
        (void)decode_restore(bytes);
    }
    // Mutations almost always break the CRC: accepting many would mean the checks are missing.
    CHECK(header_accepted < 200);
}
