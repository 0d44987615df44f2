// Checkpoints written while the chief trains on (common/checkpointer.h start_save()/poll(), SAVE
// with kFlagBackground): the checkpoint holds the parameters as SAVE found them, is committed only
// once every shard is done, and a shard's failure reaches poll(). Over in-process psd shards.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <limits>

#include "common/checkpointer.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::adam;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::small_model;
using psrun::test::TempModelDir;
namespace fs = std::filesystem;

namespace {
namespace background {

CheckpointerOptions options(const std::string& model_dir) {
    CheckpointerOptions o;
    o.model_dir = model_dir;
    o.init = adam(1e-2f, 100);
    o.every_secs = 0;
    o.every_steps = 2;
    return o;
}

psd::ServerOptions server_options(bool fork) {
    auto o = psrun::test::base_options(1);
    o.checkpoint_writer =
        fork ? psd::ServerOptions::CheckpointWriter::kAuto : psd::ServerOptions::CheckpointWriter::kLoop;
    return o;
}

// `steps` Adam steps from `from` with gradients ramp(n, 0.3 (s + 1), -0.1); the parameters after them.
std::vector<float> train(PsClient& chief, int from, int steps) {
    std::vector<float> out(chief.layout().total);
    for (int s = from; s < from + steps; ++s)
        REQUIRE(chief.push_pull(ramp(out.size(), 0.3f * static_cast<float>(s + 1), -0.1f),
                                static_cast<std::uint64_t>(s), out));
    return out;
}

std::unique_ptr<PsClient> initialised_chief(Cluster& cluster) {
    auto chief = std::make_unique<PsClient>(cluster.client_options(0, small_model()));
    REQUIRE(chief->hello());
    REQUIRE(chief->init(adam(1e-2f, 100), ramp(chief->layout().total, 0.5f, -0.2f)));
    return chief;
}

// The parameters the newest checkpoint in `model_dir` restores into one fresh shard.
std::vector<float> restored(const std::string& model_dir, std::uint64_t step) {
    Cluster fresh(1, server_options(true));
    PsClient restorer(fresh.client_options(0, small_model()));
    REQUIRE(restorer.hello());
    Checkpointer loader(options(model_dir));
    auto info = loader.restore(restorer);
    REQUIRE(info);
    REQUIRE(info->has_value());
    CHECK((*info)->step == step);
    std::vector<float> params(restorer.layout().total);
    REQUIRE(restorer.pull(params));
    return params;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool temp_dir_left(const std::string& model_dir) {
    for (const auto& e : fs::directory_iterator(model_dir))
        if (e.path().filename().string().starts_with(".ckpt-")) return true;
    return false;
}

}  // namespace background
}  // namespace

using namespace background;

TEST_CASE("a background checkpoint holds the parameters as SAVE found them, committed once all shards are done",
          "[checkpoint][background]") {
    TempModelDir model;
    Cluster cluster(2, server_options(true));
    auto chief = initialised_chief(cluster);
    const auto at_save = train(*chief, 0, 3);
    Checkpointer ckpt(options(model.path));
    REQUIRE(ckpt.due(3));

    auto started = ckpt.start_save(*chief, 3, {{"data_position", 42}});
    REQUIRE(started);
    CHECK_FALSE(started->has_value());  // psd's forked writers answer before they are done
    CHECK(ckpt.saving());
    CHECK_FALSE(ckpt.due(5));                              // not while one is being written
    CHECK(ckpt.due(5, true));                              // the last step always
    CHECK(CheckpointStore(model.path, 5).list().empty());  // nothing committed yet

    const auto after = train(*chief, 3, 5);  // the chief trains on meanwhile
    REQUIRE_FALSE(same_bits(after, at_save));
    auto done = ckpt.poll(*chief, true);
    REQUIRE(done);
    REQUIRE(done->has_value());
    CHECK((*done)->step == 3);
    CHECK_FALSE(ckpt.saving());
    CHECK(ckpt.last_saved_step() == 3u);
    CHECK(ckpt.failures() == 0);
    CHECK_FALSE(temp_dir_left(model.path));
    auto manifest = CheckpointStore::read_manifest(**done);
    REQUIRE(manifest);
    CHECK((*manifest)["extra"]["data_position"] == 42);
    CHECK(same_bits(restored(model.path, 3), at_save));  // not the 5 updates applied since

    SECTION("save() of a later step abandons the background save; of the same step, finishes it") {
        REQUIRE(ckpt.start_save(*chief, 8));
        REQUIRE(ckpt.saving());
        const auto at_final = train(*chief, 8, 2);
        auto final_save = ckpt.save(*chief, 10);  // psd kills the writer of step 8
        REQUIRE(final_save);
        CHECK(final_save->step == 10);
        CHECK_FALSE(ckpt.saving());
        auto all = CheckpointStore(model.path, 5).list();
        REQUIRE(all.size() == 2);
        CHECK(all[1].step == 10);
        CHECK_FALSE(temp_dir_left(model.path));
        CHECK(same_bits(restored(model.path, 10), at_final));

        REQUIRE(ckpt.start_save(*chief, 12));
        REQUIRE(ckpt.saving());
        auto same = ckpt.save(*chief, 12);  // the one being written is this step's: waited for
        REQUIRE(same);
        CHECK(same->step == 12);
        all = CheckpointStore(model.path, 5).list();
        REQUIRE(all.size() == 3);
        CHECK(all[2].step == 12);
        CHECK(ckpt.failures() == 0);
    }
    SECTION("without a due poll interval, poll() does not ask psd") {
        auto again = ckpt.start_save(*chief, 8);
        REQUIRE(again);
        auto polled = ckpt.poll(*chief);  // within kPollInterval of the start: not asked yet
        REQUIRE(polled);
        CHECK_FALSE(polled->has_value());
        CHECK(ckpt.saving());
        auto done8 = ckpt.poll(*chief, true);
        REQUIRE(done8);
        REQUIRE(done8->has_value());
        CHECK((*done8)->step == 8);
    }
}

TEST_CASE("a psd that writes in its loop answers the background SAVE when written", "[checkpoint][background]") {
    TempModelDir model;
    Cluster cluster(2, server_options(false));
    auto chief = initialised_chief(cluster);
    const auto at_save = train(*chief, 0, 2);
    Checkpointer ckpt(options(model.path));
    auto started = ckpt.start_save(*chief, 2);
    REQUIRE(started);
    REQUIRE(started->has_value());  // committed at once
    CHECK((*started)->step == 2);
    CHECK_FALSE(ckpt.saving());
    CHECK(same_bits(restored(model.path, 2), at_save));
}

TEST_CASE("a shard's failed background write reaches poll(); the previous checkpoint stays",
          "[checkpoint][background]") {
    TempModelDir model;
    Cluster cluster(2, server_options(true));
    auto chief = std::make_unique<PsClient>(cluster.client_options(0, small_model()));
    REQUIRE(chief->hello());
    const std::size_t n = chief->layout().total;
    wire::InitConfig sgd;
    sgd.optimizer = OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = 10.0f};
    REQUIRE(chief->init(sgd, ramp(n, 1.0f)));
    auto o = options(model.path);
    o.init = sgd;
    Checkpointer ckpt(o);
    REQUIRE(ckpt.save(*chief, 0));

    // Inf parameters on shard 1 only (a finite gradient that overflows): its writer refuses them.
    std::vector<float> grad(n, 0.0f);
    const auto& last = chief->layout().slices.back();
    REQUIRE(last.shard == 1);
    for (std::size_t i = 0; i < last.length; ++i) grad[last.flat_offset + i] = -std::numeric_limits<float>::max();
    std::vector<float> out(n);
    REQUIRE(chief->push_pull(grad, 0, out));
    auto started = ckpt.start_save(*chief, 1);
    REQUIRE(started);
    REQUIRE(ckpt.saving());
    auto done = ckpt.poll(*chief, true);
    REQUIRE_FALSE(done);
    CHECK_THAT(done.error().message, Catch::Contains("ps 1") && Catch::Contains("NaN or Inf") &&
                                         Catch::Contains("previous checkpoint stays valid"));
    CHECK_FALSE(ckpt.saving());
    CHECK(ckpt.failures() == 1);
    CHECK(ckpt.last_saved_step() == 0u);
    CHECK_FALSE(ckpt.due(2));  // the backoff after a failure
    const auto all = CheckpointStore(model.path, 5).list();
    REQUIRE(all.size() == 1);
    CHECK(all[0].step == 0);
    CHECK_FALSE(temp_dir_left(model.path));
}
