// Coordinated checkpoints across in-process psd shards (common/checkpointer.h, SAVE/RESTORE).
#include "common/checkpointer.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::adam;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::small_model;
using psrun::test::TempModelDir;
namespace fs = std::filesystem;

namespace {

psd::ServerOptions server_options() {
    psd::ServerOptions o;
    o.num_workers = 1;
    o.worker_timeout = std::chrono::milliseconds(30000);
    return o;
}

CheckpointerOptions ckpt_options(const std::string& model_dir, const wire::InitConfig& init) {
    CheckpointerOptions o;
    o.model_dir = model_dir;
    o.keep = 5;
    o.init = init;
    return o;
}

// A connected, initialised chief on `cluster` after `steps` Adam steps with gradients ramp(n, k).
std::unique_ptr<PsClient> trained_chief(Cluster& cluster, int steps) {
    auto chief = std::make_unique<PsClient>(cluster.client_options(0, small_model()));
    REQUIRE(chief->hello());
    const std::size_t n = chief->layout().total;
    REQUIRE(chief->init(adam(1e-2f, 100), ramp(n, 0.5f, -0.2f)));
    std::vector<float> out(n);
    for (int s = 0; s < steps; ++s)
        REQUIRE(chief->push_pull(ramp(n, 0.3f * static_cast<float>(s + 1), -0.1f), static_cast<std::uint64_t>(s), out));
    return chief;
}

std::size_t mismatches(const std::vector<float>& a, const std::vector<float>& b) {
    std::size_t bad = a.size() != b.size();
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) bad += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return bad;
}

}  // namespace

TEST_CASE("save then restore into fresh shards (K=2 and K=1) continues bit-identically", "[checkpoint]") {
    TempModelDir model;
    Cluster original(2, server_options());
    auto chief = trained_chief(original, 3);
    const std::size_t n = chief->layout().total;
    std::vector<float> saved_params(n);
    REQUIRE(chief->pull(saved_params));

    Checkpointer saver(ckpt_options(model.path, adam(1e-2f, 100)));
    auto info = saver.save(*chief, 3, {{"data_position", 150}, {"workers", 1}});
    REQUIRE(info);
    CHECK(info->step == 3);
    CHECK(fs::exists(info->dir + "/ps-0-of-2.tensors"));
    CHECK(fs::exists(info->dir + "/ps-1-of-2.tensors"));
    auto manifest = CheckpointStore::read_manifest(*info);
    REQUIRE(manifest);
    CHECK((*manifest)["layout"]["num_shards"] == 2);
    CHECK((*manifest)["optimizer"]["kind"] == "adam");
    CHECK((*manifest)["global_step"] == 3);

    // One more Adam step on the original: its result depends on params, both slots and Adam's t.
    const auto next_grad = ramp(n, -0.7f, 0.05f);
    std::vector<float> expected(n);
    REQUIRE(chief->push_pull(next_grad, 3, expected));
    REQUIRE(mismatches(expected, saved_params) > 0);

    for (std::uint32_t shards : {2u, 1u}) {
        INFO("restoring into " << shards << " shard(s)");
        Cluster fresh(shards, server_options());
        PsClient restorer(fresh.client_options(0, small_model()));
        REQUIRE(restorer.hello());
        CHECK_FALSE(restorer.servers_initialized());
        Checkpointer loader(ckpt_options(model.path, adam(1e-2f, 100)));
        auto restored = loader.restore(restorer);
        REQUIRE(restored);
        REQUIRE(restored->has_value());
        CHECK((*restored)->step == 3);
        CHECK((*restored)->extra["data_position"] == 150);
        CHECK((*restored)->warnings.empty());
        CHECK_FALSE(loader.due(3));  // just restored: nothing new to save

        std::vector<float> params(n);
        auto pulled = restorer.pull(params);
        REQUIRE(pulled);
        CHECK(pulled->step == 3);
        CHECK(mismatches(params, saved_params) == 0);
        std::vector<float> continued(n);
        auto step = restorer.push_pull(next_grad, 3, continued);
        REQUIRE(step);
        CHECK(step->step == 4);
        CHECK(mismatches(continued, expected) == 0);
    }
}

TEST_CASE("psd applies the learning-rate schedule per update; checkpoints record it and resume on its clock",
          "[checkpoint][lr_schedule]") {
    TempModelDir model;
    wire::InitConfig sgd;
    sgd.optimizer = OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = 1.0f};
    sgd.optimizer.schedule = *parse_lr_schedule("piecewise:boundaries=1;values=0.5,0.25");
    sgd.last_step = 100;
    Cluster original(2, server_options());
    PsClient chief(original.client_options(0, small_model()));
    REQUIRE(chief.hello());
    const std::size_t n = chief.layout().total;
    std::vector<float> params = ramp(n, 0.5f, -0.2f);
    REQUIRE(chief.init(sgd, params));
    const auto grad = ramp(n, 0.3f, 0.1f);
    std::vector<float> out(n);
    for (std::uint64_t s = 0; s < 2; ++s) {  // updates 1 and 2 (steps 0 and 1 <= the boundary): rate 0.5
        REQUIRE(chief.push_pull(grad, s, out));
        for (std::size_t i = 0; i < n; ++i) params[i] -= 0.5f * grad[i];
        REQUIRE(mismatches(out, params) == 0);
    }
    Checkpointer saver(ckpt_options(model.path, sgd));
    auto info = saver.save(chief, 2);
    REQUIRE(info);
    auto manifest = CheckpointStore::read_manifest(*info);
    REQUIRE(manifest);
    CHECK((*manifest)["optimizer"]["lr_schedule"]["kind"] == "piecewise");
    CHECK((*manifest)["optimizer"]["lr_schedule"]["boundaries"] == nlohmann::json::array({1}));

    Cluster fresh(1, server_options());
    PsClient restorer(fresh.client_options(0, small_model()));
    REQUIRE(restorer.hello());
    Checkpointer loader(ckpt_options(model.path, sgd));
    auto restored = loader.restore(restorer);
    REQUIRE(restored);
    REQUIRE(restored->has_value());
    REQUIRE((*restored)->optimizer);
    CHECK((*restored)->optimizer->schedule == sgd.optimizer.schedule);
    REQUIRE(restorer.push_pull(grad, 2, out));  // update 3 (step 2): past the boundary, rate 0.25
    for (std::size_t i = 0; i < n; ++i) params[i] -= 0.25f * grad[i];
    CHECK(mismatches(out, params) == 0);
}

TEST_CASE("restore with no checkpoint returns nullopt; a damaged newest one falls back", "[checkpoint]") {
    TempModelDir model;
    Cluster cluster(2, server_options());
    auto chief = trained_chief(cluster, 2);
    const std::size_t n = chief->layout().total;
    Checkpointer ckpt(ckpt_options(model.path, adam(1e-2f, 100)));
    {
        Cluster empty(1, server_options());
        PsClient c(empty.client_options(0, small_model()));
        REQUIRE(c.hello());
        auto none = ckpt.restore(c);
        REQUIRE(none);
        CHECK_FALSE(none->has_value());
    }
    std::vector<float> at2(n), out(n);
    REQUIRE(chief->pull(at2));
    REQUIRE(ckpt.save(*chief, 2));
    REQUIRE(chief->push_pull(ramp(n, 0.1f), 2, out));
    auto newest = ckpt.save(*chief, 3);
    REQUIRE(newest);

    const std::string victim = newest->dir + "/ps-1-of-2.tensors";
    {
        std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(fs::file_size(victim) / 2));
        char c = 0;
        f.read(&c, 1);
        f.seekp(static_cast<std::streamoff>(fs::file_size(victim) / 2));
        c = static_cast<char>(c ^ 0x10);
        f.write(&c, 1);
    }
    Cluster fresh(2, server_options());
    PsClient restorer(fresh.client_options(0, small_model()));
    REQUIRE(restorer.hello());
    Checkpointer loader(ckpt_options(model.path, adam(1e-2f, 100)));
    auto restored = loader.restore(restorer);
    REQUIRE(restored);
    REQUIRE(restored->has_value());
    CHECK((*restored)->step == 2);
    REQUIRE((*restored)->warnings.size() == 1);
    CHECK_THAT((*restored)->warnings[0], Catch::Contains("ps-1-of-2.tensors"));
    std::vector<float> params(n);
    REQUIRE(restorer.pull(params));
    CHECK(mismatches(params, at2) == 0);
}

TEST_CASE("a shard that cannot save aborts the checkpoint and keeps the previous one", "[checkpoint]") {
    TempModelDir model;
    Cluster cluster(2, server_options());
    auto chief = std::make_unique<PsClient>(cluster.client_options(0, small_model()));
    REQUIRE(chief->hello());
    const std::size_t n = chief->layout().total;
    wire::InitConfig sgd;
    sgd.optimizer = OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = 10.0f};
    REQUIRE(chief->init(sgd, ramp(n, 1.0f)));
    Checkpointer ckpt(ckpt_options(model.path, sgd));
    REQUIRE(ckpt.save(*chief, 0));

    SECTION("a path that is not a directory: clear I/O error from every shard") {
        const std::string file = model.path + "/not-a-dir";
        std::ofstream(file) << "x";
        auto r = chief->save(1, file);
        REQUIRE_FALSE(r);
        CHECK(r.error().code == ErrorCode::kIo);
        CHECK_THAT(r.error().message, Catch::Contains("not-a-dir") && Catch::Contains("Not a directory"));
        CHECK_FALSE(chief->save(1, "relative/dir"));
    }
    SECTION("Inf parameters on shard 1 only (a finite gradient that overflows): never checkpointed") {
        std::vector<float> grad(n, 0.0f);
        const auto& last = chief->layout().slices.back();
        REQUIRE(last.shard == 1);
        for (std::size_t i = 0; i < last.length; ++i) grad[last.flat_offset + i] = -std::numeric_limits<float>::max();
        std::vector<float> out(n);
        REQUIRE(chief->push_pull(grad, 0, out));  // accepted: the gradient itself is finite
        auto r = ckpt.save(*chief, 1);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains("ps 1") && Catch::Contains("NaN or Inf") &&
                                          Catch::Contains("previous checkpoint stays valid"));
    }
    auto all = CheckpointStore(model.path, 5).list();
    REQUIRE(all.size() == 1);
    CHECK(all[0].step == 0);
    for (const auto& e : fs::directory_iterator(model.path))
        CHECK_FALSE(e.path().filename().string().starts_with(".ckpt-"));  // no temp dir left behind
    std::vector<std::string> warnings;
    auto valid = CheckpointStore(model.path, 5).latest_valid(&warnings);
    REQUIRE(valid);
    CHECK(valid->step == 0);
    CHECK(warnings.empty());
}

TEST_CASE("due() saves on the step and time intervals and always at the last step", "[checkpoint]") {
    TempModelDir model;
    CheckpointerOptions o = ckpt_options(model.path, adam(1e-2f, 100));
    o.every_secs = 0;
    o.every_steps = 100;
    Checkpointer by_steps(o);
    CHECK_FALSE(by_steps.due(99));
    CHECK(by_steps.due(100));
    CHECK(by_steps.due(7, /*last=*/true));
    o.every_steps = 0;
    o.every_secs = 0.05;
    Checkpointer by_time(o);
    CHECK_FALSE(by_time.due(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    CHECK(by_time.due(1));
    o.every_secs = 0;
    Checkpointer never(o);
    CHECK_FALSE(never.due(1000000));
    CHECK(never.due(1000000, true));
}

TEST_CASE("mnist_deep: K=2 checkpoint restores into K=1 and releases workers waiting at the barrier", "[checkpoint]") {
    TempModelDir model;
    const auto tensors = mnist_deep_tensors();
    const std::size_t n = total_elements(tensors);
    std::vector<float> saved(n);
    {
        Cluster original(2, server_options());
        PsClient chief(original.client_options(0, tensors));
        REQUIRE(chief.hello());
        REQUIRE(chief.init(adam(1e-2f, 100), ramp(n, 0.2f, -0.1f)));
        ParamFrames frames;
        REQUIRE(chief.push_pull_frames(ramp(n, 1.0f, -0.5f), 0, frames));
        frames.copy_to(saved, chief.layout());
        Checkpointer ckpt(ckpt_options(model.path, adam(1e-2f, 100)));
        REQUIRE(ckpt.save(chief, 1, {{"epoch", 0}}));
    }
    psd::ServerOptions two_workers = server_options();
    two_workers.num_workers = 2;
    Cluster fresh(1, two_workers);
    PsClient worker(fresh.client_options(1, tensors));
    REQUIRE(worker.hello());
    std::vector<float> worker_params(n);
    auto waiting = std::async(std::launch::async, [&] { return worker.pull(worker_params); });
    REQUIRE(waiting.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);  // at the barrier

    PsClient chief(fresh.client_options(0, tensors));
    REQUIRE(chief.hello());
    Checkpointer loader(ckpt_options(model.path, adam(1e-2f, 100)));
    auto restored = loader.restore(chief);
    REQUIRE(restored);
    REQUIRE(restored->has_value());
    CHECK((*restored)->step == 1);
    CHECK((*restored)->extra["epoch"] == 0);
    REQUIRE(waiting.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
    auto released = waiting.get();
    REQUIRE(released);
    CHECK(released->step == 1);
    CHECK(mismatches(worker_params, saved) == 0);
}

TEST_CASE("psd refuses SAVE and RESTORE from non-chiefs, before INIT, or from a missing checkpoint", "[checkpoint]") {
    TempModelDir model;
    psd::ServerOptions two_workers = server_options();
    two_workers.num_workers = 2;
    Cluster cluster(1, two_workers);
    PsClient chief(cluster.client_options(0, small_model()));
    REQUIRE(chief.hello());
    auto early = chief.save(0, model.path);
    REQUIRE_FALSE(early);
    CHECK_THAT(early.error().message, Catch::Contains("before INIT"));
    auto missing = chief.restore(adam(1e-2f, 100), model.path + "/ckpt-0000000009");
    REQUIRE_FALSE(missing);
    CHECK_THAT(missing.error().message, Catch::Contains("not a directory"));
    auto empty = chief.restore(adam(1e-2f, 100), model.path);
    REQUIRE_FALSE(empty);
    CHECK_THAT(empty.error().message, Catch::Contains("no psd shard files"));

    PsClient worker(cluster.client_options(1, small_model()));
    REQUIRE(worker.hello());
    auto by_worker = worker.save(0, model.path);
    REQUIRE_FALSE(by_worker);
    CHECK(by_worker.error().code == ErrorCode::kUnauthorized);
    auto restore_by_worker = worker.restore(adam(1e-2f, 100), model.path);
    REQUIRE_FALSE(restore_by_worker);
    CHECK(restore_by_worker.error().code == ErrorCode::kUnauthorized);
    auto stats = chief.stats(0);
    REQUIRE(stats);
    CHECK((*stats)["initialized"] == false);
    CHECK((*stats)["checkpoints"] == 0);
}

// Run by test/psd/disk_full.sh inside a private mount namespace with a small tmpfs at
// $PSRUN_TEST_TMPFS (hidden otherwise: it needs that mount).
TEST_CASE("disk full while saving: clear error, the previous checkpoint stays valid", "[.][diskfull]") {
    const char* tmpfs = std::getenv("PSRUN_TEST_TMPFS");
    REQUIRE(tmpfs != nullptr);
    const std::string model_dir = std::string(tmpfs) + "/model";
    Cluster cluster(2, server_options());
    auto chief = trained_chief(cluster, 1);
    Checkpointer ckpt(ckpt_options(model_dir, adam(1e-2f, 100)));
    REQUIRE(ckpt.save(*chief, 1));
    {  // leave 8 KiB free: far less than a shard file (~36 KiB of params + Adam slots per shard)
        const auto space = fs::space(tmpfs);
        std::ofstream filler(std::string(tmpfs) + "/filler", std::ios::binary);
        const std::string block(4096, 'x');
        for (std::uintmax_t left = space.available; left > 8192 + 4096; left -= 4096) filler.write(block.data(), 4096);
    }
    std::vector<float> out(chief->layout().total);
    REQUIRE(chief->push_pull(ramp(out.size(), 0.1f), 1, out));
    auto r = ckpt.save(*chief, 2);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kIo);
    CHECK_THAT(r.error().message,
               Catch::Contains("No space left on device") && Catch::Contains("previous checkpoint stays valid"));
    for (const auto& e : fs::directory_iterator(model_dir))
        CHECK_FALSE(e.path().filename().string().starts_with(".ckpt-"));  // temp dir removed
    std::vector<std::string> warnings;
    auto valid = CheckpointStore(model_dir, 5).latest_valid(&warnings);
    REQUIRE(valid);
    CHECK(valid->step == 1);
    CHECK(warnings.empty());
    // The failure is counted and backs off: no periodic save is due for 1 s, the final step is.
    CHECK(ckpt.failures() == 1);
    CHECK_THAT(ckpt.last_error(), Catch::Contains("No space left on device"));
    CHECK(ckpt.retry_in() == std::chrono::milliseconds(1000));
    CHECK_FALSE(ckpt.due(1000000));
    CHECK(ckpt.due(1000000, true));
    CHECK(ckpt.last_saved_step() == 1u);
    REQUIRE_FALSE(ckpt.save(*chief, 2));  // a second failure in a row doubles the wait
    CHECK(ckpt.failures() == 2);
    CHECK(ckpt.retry_in() == std::chrono::milliseconds(2000));
    fs::remove(std::string(tmpfs) + "/filler");
    auto retry = ckpt.save(*chief, 2);  // space is back: the same step saves fine
    REQUIRE(retry);
    CHECK(retry->step == 2);
    CHECK(ckpt.retry_in() == std::chrono::milliseconds(0));
    CHECK(ckpt.failures() == 2);  // failures of the run stay counted
}
