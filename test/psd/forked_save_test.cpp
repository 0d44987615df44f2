// SAVE written by a forked child (psd/forked_task.h, psd/parameter_server_save.cpp): the child's
// result and death reach the parent; psd keeps serving other workers while the child writes; a
// failed write answers the SAVE with the child's error; the file equals one written in the loop,
// also when a writer thread writes it from the rows' snapshot while a worker changes them.
#include "psd/forked_task.h"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "common/checkpoint_params.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using namespace psrun::test;
using namespace std::chrono_literals;

TEST_CASE("a forked task's result, error and death reach the parent", "[psd][forked]") {
    SECTION("done: the child's changes stay in the child") {
        int value = 1;
        auto task = psd::ForkedTask::start([&value]() -> Result<void> {
            value = 2;  // the child's copy
            return {};
        });
        REQUIRE(task);
        CHECK((*task)->pid() > 0);
        CHECK((*task)->finish());
        CHECK(value == 1);
    }
    SECTION("an error keeps its code and message") {
        auto task =
            psd::ForkedTask::start([]() -> Result<void> { return make_error(ErrorCode::kNotFound, "no such thing"); });
        REQUIRE(task);
        auto done = (*task)->finish();
        REQUIRE_FALSE(done);
        CHECK(done.error().code == ErrorCode::kNotFound);
        CHECK(done.error().message == "no such thing");
    }
    SECTION("an exception is an error, not a crash of either process") {
        auto task = psd::ForkedTask::start([]() -> Result<void> { throw std::runtime_error("disk on fire"); });
        REQUIRE(task);
        auto done = (*task)->finish();
        REQUIRE_FALSE(done);
        CHECK(done.error().message == "disk on fire");
    }
    SECTION("a child killed by a signal is named") {
        auto task = psd::ForkedTask::start([]() -> Result<void> {
            ::raise(SIGKILL);
            return {};
        });
        REQUIRE(task);
        auto done = (*task)->finish();
        REQUIRE_FALSE(done);
        CHECK_THAT(done.error().message, Catch::Contains("died on signal 9"));
    }
    SECTION("destroying a running task kills and reaps its child") {
        pid_t pid = 0;
        {
            auto task = psd::ForkedTask::start([]() -> Result<void> {
                ::pause();  // until killed
                return {};
            });
            REQUIRE(task);
            pid = (*task)->pid();
            CHECK(::kill(pid, 0) == 0);
        }
        CHECK(::kill(pid, 0) == -1);  // reaped: no such process (not even a zombie)
    }
}

namespace {

// One psd shard and two workers (the chief initialised it with ramp(n, 1)), and a dir `held` whose
// shard file is a FIFO: the writer's open() waits for a reader, so a write is held until the test
// reads it (read_held()), as a slow disk would hold it.
struct HeldWrite {
    Cluster cluster{1, base_options(2)};
    PsClient chief{cluster.client_options(0, small_model())}, worker{cluster.client_options(1, small_model())};
    std::size_t n = 0;
    std::vector<float> params;
    std::string held = cluster.dir() + "/held";

    HeldWrite() {
        REQUIRE(chief.hello());
        REQUIRE(worker.hello());
        n = chief.layout().total;
        REQUIRE(chief.init(sgd(0.1f), ramp(n, 1.0f)));
        params.resize(n);
        REQUIRE(worker.pull(params));
        std::filesystem::create_directories(held);
        REQUIRE(::mkfifo((held + "/ps-0-of-1.tensors").c_str(), 0600) == 0);
    }
    // Lets the writer go: reads what it writes. Returns the bytes read.
    std::size_t read_held() const {
        std::ifstream fifo(held + "/ps-0-of-1.tensors", std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(fifo)), std::istreambuf_iterator<char>()).size();
    }
};

}  // namespace

TEST_CASE("psd serves the other workers while a forked writer writes the checkpoint", "[psd][forked][checkpoint]") {
    HeldWrite h;
    auto &chief = h.chief, &worker = h.worker;
    auto& params = h.params;
    const std::size_t n = h.n;
    const std::string held = h.held;

    auto save = std::async(std::launch::async, [&] { return chief.save(1, held); });
    std::this_thread::sleep_for(200ms);
    REQUIRE(save.wait_for(0ms) == std::future_status::timeout);  // the chief waits for the writer

    for (std::uint64_t step = 0; step < 5; ++step)  // the loop serves worker 1 meanwhile
        REQUIRE(worker.push_pull(ramp(n, 0.01f), step, params));
    CHECK(save.wait_for(0ms) == std::future_status::timeout);

    CHECK(h.read_held() > n * sizeof(float));  // lets the writer go
    const auto saved = save.get();
    // A FIFO cannot be fsynced: the child's error answers the SAVE, naming the file.
    REQUIRE_FALSE(saved);
    CHECK_THAT(saved.error().message, Catch::Contains("ps-0-of-1.tensors") && Catch::Contains("fsync"));

    // The next SAVE writes a real file, holding the 5 updates applied while the first was held.
    const std::string dir = h.cluster.dir() + "/ok";
    std::filesystem::create_directories(dir);
    REQUIRE(chief.save(5, dir));
    std::ofstream(dir + "/manifest.json") << R"({"step": 5, "files": ["ps-0-of-1.tensors"]})";
    auto written = load_checkpoint_parameters(dir, small_model());
    REQUIRE(written);
    std::vector<float> expected(n);
    REQUIRE(chief.pull(expected));
    CHECK(written->values == expected);
    CHECK(expected != ramp(n, 1.0f));
}

TEST_CASE("a background SAVE is answered at once, and again with the write's outcome", "[psd][forked][checkpoint]") {
    HeldWrite h;
    auto &chief = h.chief, &worker = h.worker;
    auto& params = h.params;
    const std::size_t n = h.n;
    const std::string held = h.held;

    auto writing = chief.save_background(1, held, {0});
    REQUIRE(writing);
    CHECK(*writing == std::vector<std::uint32_t>{0});  // answered while the writer waits
    for (std::uint64_t step = 0; step < 3; ++step) {   // the chief trains on, and so does worker 1
        REQUIRE(chief.push_pull(ramp(n, 0.01f), step, params));
        REQUIRE(worker.push_pull(ramp(n, 0.01f), step, params));
    }
    writing = chief.save_background(1, held, {0});  // asked again: still writing
    REQUIRE(writing);
    CHECK(*writing == std::vector<std::uint32_t>{0});

    CHECK(h.read_held() > n * sizeof(float));  // lets the writer go
    Result<std::vector<std::uint32_t>> outcome = std::vector<std::uint32_t>{0};
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (outcome && !outcome->empty() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(20ms);
        outcome = chief.save_background(1, held, {0});
    }
    REQUIRE_FALSE(outcome);  // a FIFO cannot be fsynced: the child's error, told once asked
    CHECK_THAT(outcome.error().message, Catch::Contains("ps-0-of-1.tensors") && Catch::Contains("fsync"));

    const std::string dir = h.cluster.dir() + "/ok";  // the outcome was taken: a new SAVE may start
    std::filesystem::create_directories(dir);
    writing = chief.save_background(7, dir, {0});
    REQUIRE(writing);
    while (writing && !writing->empty() && std::chrono::steady_clock::now() < deadline + 10s) {
        std::this_thread::sleep_for(20ms);
        writing = chief.save_background(7, dir, {0});
    }
    REQUIRE(writing);
    CHECK(writing->empty());
    CHECK(std::filesystem::file_size(dir + "/ps-0-of-1.tensors") > n * sizeof(float));

    // A background write under way is abandoned by a SAVE of another dir (the chief's final or
    // preemption checkpoint): psd kills the held writer and writes the new one.
    const std::string held2 = h.cluster.dir() + "/held2", other = h.cluster.dir() + "/other";
    std::filesystem::create_directories(held2);
    std::filesystem::create_directories(other);
    REQUIRE(::mkfifo((held2 + "/ps-0-of-1.tensors").c_str(), 0600) == 0);
    writing = chief.save_background(8, held2, {0});
    REQUIRE(writing);
    CHECK(*writing == std::vector<std::uint32_t>{0});
    REQUIRE(chief.save(9, other));  // blocking, and not held by the FIFO writer
    CHECK(std::filesystem::file_size(other + "/ps-0-of-1.tensors") > n * sizeof(float));
}

namespace {

// A shard's checkpoint of a dense tensor and a lazily created sparse table after 4 Adam steps
// that touch 40 of its 997 rows, written by `writer`; the file's bytes. With `changed_meanwhile`,
// the file is a FIFO that holds the write while worker 1 pushes 8 more steps to 40 rows each
// (rows read and not yet read, rows created), then read; the SAVE then fails (a FIFO cannot be
// fsynced), but the bytes are those written. With `keyed`, the table is keyed by raw ids (997
// slots, rows idle for 5 updates evicted): the pulls admit rows, the pushes evict others.
std::string saved_bytes(psd::ServerOptions::CheckpointWriter writer, bool changed_meanwhile = false,
                        bool keyed = false) {
    auto options = base_options(2);
    options.checkpoint_writer = writer;
    Cluster cluster(1, options);
    std::vector<TensorSpec> model = {{"fc/w", {8, 5}}, {"emb", {997, 4}}};
    model[1].kind = keyed ? TensorKind::kKeyedRows : TensorKind::kRows;
    model[1].row_init = RowInit{RowInitKind::kNormal, 0.05f, 9};
    if (keyed) model[1].row_policy = RowPolicy{.evict_after = 5};
    PsClient chief(cluster.client_options(0, model)), worker(cluster.client_options(1, model));
    REQUIRE(chief.hello());
    REQUIRE(worker.hello());
    wire::InitConfig init;
    init.optimizer = OptimizerConfig{.kind = OptimizerKind::kAdam, .learning_rate = 0.01f};
    REQUIRE(chief.init(init, ramp(chief.layout().total, 0.5f)));
    auto push = [&](PsClient& client, int s, std::uint32_t rows, std::uint32_t stride) {
        std::vector<std::uint32_t> ids;
        for (std::uint32_t i = 0; i < rows; ++i) ids.push_back((i * stride + static_cast<std::uint32_t>(s) * 17) % 997);
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        const auto values = ramp(ids.size() * 4, 0.2f * static_cast<float>(s + 1), -0.05f);
        const std::vector<std::uint64_t> keys(ids.begin(), ids.end());  // raw ids: the rows' numbers << 24
        std::vector<std::uint64_t> raw(keys.size());
        for (std::size_t i = 0; i < keys.size(); ++i) raw[i] = keys[i] << 24 | 0x5;
        if (keyed) {  // pulled first: admitted
            const RowRequest request{.tensor = 1, .keys = raw};
            PulledRows pulled;
            REQUIRE(client.exchange(Exchange{.pulls = {&request, 1}, .rows = &pulled}));
        }
        const RowGrads grads = keyed ? RowGrads{.tensor = 1, .values = values, .keys = raw} : RowGrads{1, ids, values};
        REQUIRE(client.exchange(Exchange{.grads = ramp(client.layout().total, 0.1f, static_cast<float>(s)),
                                         .step = static_cast<std::uint64_t>(s),
                                         .row_grads = {&grads, 1}}));
    };
    for (int s = 0; s < 4; ++s) push(chief, s, 10, 61);
    const std::string dir = cluster.dir() + "/ckpt", file = dir + "/ps-0-of-1.tensors";
    std::filesystem::create_directories(dir);
    if (!changed_meanwhile) {
        REQUIRE(chief.save(4, dir));
        std::ifstream in(file, std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }
    REQUIRE(::mkfifo(file.c_str(), 0600) == 0);
    auto save = std::async(std::launch::async, [&] { return chief.save(4, dir); });
    std::this_thread::sleep_for(200ms);  // SAVE is in: the snapshot is taken, the write held
    for (int s = 0; s < 8; ++s) push(worker, s, 40, 37);
    CHECK(save.wait_for(0ms) == std::future_status::timeout);
    std::ifstream in(file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto saved = save.get();
    REQUIRE_FALSE(saved);
    CHECK_THAT(saved.error().message, Catch::Contains("fsync"));
    return bytes;
}

}  // namespace

TEST_CASE("the forked writer's and the writer thread's shard files are the one the poll loop writes, byte for byte",
          "[psd][forked][checkpoint]") {
    using Writer = psd::ServerOptions::CheckpointWriter;
    const std::string forked = saved_bytes(Writer::kFork), in_loop = saved_bytes(Writer::kLoop);
    // The blocks of 16 rows holding the 40 rows created, with their 2 slots; not the untouched blocks.
    CHECK(forked.size() > 40 * 4 * 3 * sizeof(float));
    CHECK(forked.size() < 997 * 4 * 3 * sizeof(float));
    CHECK(forked == in_loop);
    CHECK(saved_bytes(Writer::kThread) == in_loop);
    CHECK(saved_bytes(Writer::kAuto) == in_loop);  // the thread: the shard has a sparse table
    // Written while another worker changes the rows: the rows as SAVE found them.
    CHECK(saved_bytes(Writer::kThread, true) == in_loop);
    CHECK(saved_bytes(Writer::kFork, true) == in_loop);
    // A table keyed by raw ids, rows admitted and evicted meanwhile: its rows and id map as they were.
    const std::string keyed = saved_bytes(Writer::kLoop, false, true);
    CHECK(keyed.size() > 997 * 4 * 3 * sizeof(float));
    CHECK(saved_bytes(Writer::kFork, true, true) == keyed);
    CHECK(saved_bytes(Writer::kThread, true, true) == keyed);
}
