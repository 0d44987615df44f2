// Shared-memory exchange (common/shm_segment.h): the segment's checks, the ATTACH body, the header
// rules, and in-process psd shards that must give bit-identical results through shared memory
// and through payload frames.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <zmq_addon.hpp>

#include "common/shm_segment.h"
#include "common/zmq_util.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::small_model;

namespace {

const ShmGeometry kGeometry{1000, 2};

psd::ServerOptions options(std::uint32_t workers) {
    psd::ServerOptions o;
    o.num_workers = workers;
    o.worker_timeout = std::chrono::milliseconds(30000);
    return o;
}

wire::InitConfig adam_config() {
    wire::InitConfig c;
    c.optimizer = OptimizerConfig{.kind = OptimizerKind::kAdam, .learning_rate = 1e-3f};
    return c;
}

bool exists(const std::string& path) { return std::filesystem::exists(std::filesystem::symlink_status(path)); }

}  // namespace

TEST_CASE("a segment is a private tmpfs file that only its creator's nonce opens", "[shm]") {
    auto seg = ShmSegment::create(kGeometry);
    REQUIRE(seg);
    const auto request = seg->attach_request();
    struct stat st {};
    REQUIRE(stat(request.path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(static_cast<std::size_t>(st.st_size) == kGeometry.total_bytes());
    CHECK(kGeometry.params_offset() % 4096 == 0);
    CHECK(kGeometry.grads_offset(1) - kGeometry.grads_offset(0) == kGeometry.region_bytes());

    auto peer = ShmSegment::open(request);
    REQUIRE(peer);
    seg->grads(1)[7] = 42.0f;  // both mappings see one memory
    CHECK(peer->grads(1)[7] == 42.0f);
    peer->params()[999] = -1.0f;
    CHECK(seg->params()[999] == -1.0f);

    auto wrong_nonce = request;
    wrong_nonce.nonce[3] ^= 1;
    auto r = ShmSegment::open(wrong_nonce);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kUnauthorized);
    auto wrong_size = request;
    wrong_size.geometry.regions = 1;
    REQUIRE_FALSE(ShmSegment::open(wrong_size));

    REQUIRE(chmod(request.path.c_str(), 0640) == 0);
    r = ShmSegment::open(request);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("private"));
    REQUIRE(chmod(request.path.c_str(), 0600) == 0);

    const std::string link = std::string(kDefaultShmDir) + "/psrun-test-link-" + std::to_string(getpid());
    REQUIRE(symlink(request.path.c_str(), link.c_str()) == 0);
    auto via_link = request;
    via_link.path = link;
    CHECK_FALSE(ShmSegment::open(via_link));
    ::unlink(link.c_str());

    seg->unlink();
    CHECK_FALSE(exists(request.path));
    CHECK(peer->grads(1)[7] == 42.0f);  // the mappings outlive the name
    CHECK_FALSE(ShmSegment::open(request));
}

TEST_CASE("a segment is never created outside a tmpfs, and a failed one leaves no file", "[shm]") {
    const std::string dir = psrun::test::make_temp_dir();  // /tmp: a disk filesystem on these hosts
    auto seg = ShmSegment::create(kGeometry, dir);
    if (seg) {
        SUCCEED("the temp dir is a tmpfs here; nothing to check");
    } else {
        CHECK(seg.error().code == ErrorCode::kUnsupported);
        CHECK(std::filesystem::is_empty(dir));
    }
    std::filesystem::remove_all(dir);
    CHECK_FALSE(ShmSegment::create(kGeometry, "/nonexistent-psrun-dir"));
}

TEST_CASE("ATTACH bodies round-trip and every bad field is refused", "[shm][wire]") {
    AttachRequest a{"/dev/shm/psrun-0-abc", {123456, 2}, {}};
    a.nonce[0] = 9;
    const std::string bytes = encode_attach(a);
    auto back = decode_attach(bytes);
    REQUIRE(back);
    CHECK(back->path == a.path);
    CHECK(back->geometry.floats == 123456);
    CHECK(back->geometry.regions == 2);
    CHECK(back->nonce == a.nonce);
    CHECK_FALSE(decode_attach(bytes.substr(0, bytes.size() - 1)));
    CHECK_FALSE(decode_attach(bytes + "x"));
    auto bad = a;
    bad.path = "relative/path";
    CHECK_FALSE(decode_attach(encode_attach(bad)));
    bad = a;
    bad.geometry.regions = 0;
    CHECK_FALSE(decode_attach(encode_attach(bad)));
    bad.geometry.regions = kMaxShmRegions + 1;
    CHECK_FALSE(decode_attach(encode_attach(bad)));
    bad = a;
    bad.geometry.floats = 0;
    CHECK_FALSE(decode_attach(encode_attach(bad)));
}

TEST_CASE("headers: a shared-memory push names a region and carries no frames", "[shm][wire]") {
    wire::Header h;
    h.type = wire::MessageType::kPushPull;
    h.flags = wire::kFlagShm;
    h.aux = 1;
    auto ok = wire::decode_header(wire::encode_header(h));
    REQUIRE(ok);
    CHECK(ok->aux == 1);
    h.aux = 2;
    CHECK_FALSE(wire::decode_header(wire::encode_header(h)));
    h.aux = 0;
    h.frames = {{0, 4}};
    CHECK_FALSE(wire::decode_header(wire::encode_header(h)));
    h.frames.clear();
    h.type = wire::MessageType::kPull;  // aux is a region only on PUSH and PUSH_PULL
    h.aux = 1;
    CHECK_FALSE(wire::decode_header(wire::encode_header(h)));
    h.flags = 0;
    h.type = wire::MessageType::kPush;
    CHECK_FALSE(wire::decode_header(wire::encode_header(h)));
}

TEST_CASE("Adam through shared memory equals Adam through frames, with 1 and 2 shards", "[shm][psd]") {
    const auto tensors = mnist_deep_tensors();
    const std::size_t n = total_elements(tensors);
    const auto init_params = ramp(n, 0.2f, -0.1f);
    const std::vector<std::vector<float>> grads = {ramp(n, 1.0f, -0.5f), ramp(n, -0.3f, 0.2f), ramp(n, 0.7f)};
    std::vector<float> expected = init_params;
    Optimizer local(adam_config().optimizer, n);
    for (const auto& g : grads) local.apply(expected, g);

    for (std::uint32_t shards : {1u, 2u}) {
        Cluster cluster(shards, options(1));
        auto co = cluster.client_options(0, tensors);
        co.shared_memory = true;
        co.shm_regions = 2;
        PsClient chief(co);
        REQUIRE(chief.hello());
        CHECK(chief.shm_shards() == shards);
        REQUIRE(chief.init(adam_config(), init_params));
        ParamFrames frames;
        // Step 0 from the caller's buffer (copied into region 0), then from regions 1 and 0 in place.
        REQUIRE(chief.push_pull_frames(grads[0], 0, frames));
        for (std::size_t s = 1; s < grads.size(); ++s) {
            auto region = chief.gradient_buffer(static_cast<std::uint32_t>(s % 2));
            REQUIRE(region.size() == n);
            std::copy(grads[s].begin(), grads[s].end(), region.begin());
            auto step = chief.push_pull_frames(region, s, frames);
            REQUIRE(step);
            CHECK(step->step == s + 1);
        }
        std::vector<float> out(n);
        frames.copy_to(out, chief.layout());
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < n; ++i) mismatches += out[i] != expected[i];
        CHECK(mismatches == 0);
        std::vector<float> pulled(n);
        REQUIRE(chief.pull(pulled));
        CHECK(pulled == out);
        // The segment's name is gone from /dev/shm once the shards mapped it.
        for (const auto& entry : std::filesystem::directory_iterator(kDefaultShmDir))
            CHECK(entry.path().filename().string().rfind("psrun-" + std::to_string(geteuid()) + "-", 0) != 0);
    }
}

TEST_CASE("a NaN in a shared-memory gradient is rejected and the weights stay untouched", "[shm][psd]") {
    Cluster cluster(1, options(1));  // with 2 shards, the one whose slices are finite would apply them
    auto co = cluster.client_options(0, small_model());
    co.shared_memory = true;
    PsClient chief(co);
    REQUIRE(chief.hello());
    REQUIRE(chief.shm_shards() == 1);
    const std::size_t n = chief.layout().total;
    const auto params = ramp(n, 1.0f);
    REQUIRE(chief.init(adam_config(), params));
    auto g = ramp(n, 0.5f);
    g[n - 1] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> out(n);
    auto r = chief.push_pull(g, 0, out);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kRejected);
    REQUIRE(chief.pull(out));
    CHECK(out == params);
}

TEST_CASE("sync mode through shared memory averages the workers' gradients", "[shm][psd]") {
    auto o = options(2);
    o.sync = true;
    o.replicas_to_aggregate = 2;
    Cluster cluster(1, o);
    auto co_a = cluster.client_options(0, small_model());
    auto co_b = cluster.client_options(1, small_model());
    co_a.shared_memory = true;  // one worker through shared memory, one through frames
    PsClient a(co_a), b(co_b);
    REQUIRE(a.hello());
    REQUIRE(b.hello());
    CHECK(a.shm_shards() == 1);
    CHECK(b.shm_shards() == 0);
    const std::size_t n = a.layout().total;
    const auto params = ramp(n, 1.0f), ga = ramp(n, 0.4f), gb = ramp(n, -0.2f, 1.0f);
    wire::InitConfig sgd;
    sgd.optimizer = OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = 0.5f};
    REQUIRE(a.init(sgd, params));
    std::vector<float> out_a(n), out_b(n);
    auto first = std::async(std::launch::async, [&] { return a.push_pull(ga, 0, out_a); });
    REQUIRE(b.push_pull(gb, 0, out_b));
    REQUIRE(first.get());
    for (std::size_t i = 0; i < n; ++i) REQUIRE(out_a[i] == Approx(params[i] - 0.25f * (ga[i] + gb[i])).margin(1e-6));
    CHECK(out_a == out_b);
}

TEST_CASE("without a usable tmpfs the client falls back to frames and still trains", "[shm][psd]") {
    Cluster cluster(1, options(1));
    auto co = cluster.client_options(0, small_model());
    co.shared_memory = true;
    co.shm_dir = cluster.dir();  // /tmp: not a tmpfs on these hosts
    PsClient chief(co);
    REQUIRE(chief.hello());
    if (chief.shm_shards() != 0) return;  // the temp dir is a tmpfs here: nothing to fall back from
    CHECK(chief.gradient_buffer(0).empty());
    const std::size_t n = chief.layout().total;
    const auto params = ramp(n, 1.0f), g = ramp(n, 0.5f);
    REQUIRE(chief.init(adam_config(), params));
    std::vector<float> out(n);
    REQUIRE(chief.push_pull(g, 0, out));
    CHECK(out != params);
}

TEST_CASE("psd refuses a hostile ATTACH and a shared-memory push without one, and goes on", "[shm][psd]") {
    Cluster cluster(1, options(1));
    PsClient chief(cluster.client_options(0, small_model()));
    REQUIRE(chief.hello());
    const std::size_t n = chief.layout().total;
    REQUIRE(chief.init(adam_config(), ramp(n, 1.0f)));

    // A raw client: HELLO, then ATTACH naming a file it did not create, then a shared-memory PUSH.
    zmq::context_t ctx(1);
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvtimeo, 5000);
    s.connect(cluster.endpoints()[0]);
    auto ask = [&](wire::Header h, const std::string* body) {
        if (body) h.frames.push_back({wire::kBodyFrame, static_cast<std::uint32_t>(body->size())});
        const std::string head = wire::encode_header(h);
        s.send(zmq::buffer(head), body ? zmq::send_flags::sndmore : zmq::send_flags::none);
        if (body) s.send(zmq::buffer(*body), zmq::send_flags::none);
        std::vector<zmq::message_t> parts;
        REQUIRE(zmq::recv_multipart(s, std::back_inserter(parts)));
        auto reply = wire::decode_header(view(parts[0]));
        REQUIRE(reply);
        return std::make_pair(reply->type, parts.size() > 1 ? std::string(view(parts[1])) : std::string());
    };
    wire::Header h;
    h.index = 0;
    h.type = wire::MessageType::kHello;
    const std::string tensors = wire::encode_hello(wire::Hello{{"small", ""}, small_model()});
    CHECK(ask(h, &tensors).first == wire::MessageType::kWelcome);

    const std::string victim = cluster.dir() + "/victim";
    std::ofstream(victim) << std::string(ShmGeometry{n, 1}.total_bytes(), 'x');
    h.type = wire::MessageType::kAttach;
    for (const std::string& path : {victim, std::string("/etc/passwd"), std::string("/dev/shm/no-such-file")}) {
        const std::string body = encode_attach(AttachRequest{path, {n, 1}, {}});
        auto [type, error] = ask(h, &body);
        CHECK(type == wire::MessageType::kError);
    }
    h.type = wire::MessageType::kPush;
    h.flags = wire::kFlagShm;
    auto [type, error] = ask(h, nullptr);
    CHECK(type == wire::MessageType::kError);
    CHECK_THAT(error, Catch::Contains("without an accepted ATTACH"));

    std::vector<float> out(n);  // the real worker is unaffected
    REQUIRE(chief.push_pull(ramp(n, 0.1f), 0, out));
}
