// The standby shard file (ShardState::save/load): a tensor file with CRC-32C per tensor.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "common/tensor_file.h"
#include "psd/shard_state.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;

TEST_CASE("standby shard file keeps params, Adam slots, update count and step; damage is refused", "[psd][shard]") {
    const auto tensors = psrun::test::small_model();
    const auto layout = *compute_layout(tensors, 2);
    const std::string dir = psrun::test::make_temp_dir();
    const std::string path = dir + "/ps-1.shard";

    psd::ShardState a(layout, 1, tensors);
    wire::InitConfig config;
    config.optimizer = OptimizerConfig{.kind = OptimizerKind::kAdam, .learning_rate = 1e-2f};
    config.last_step = 50;
    std::vector<std::vector<float>> init, grad;
    for (auto id : a.slice_ids()) {
        init.push_back(psrun::test::ramp(layout.slices[id].length, 0.5f));
        grad.push_back(psrun::test::ramp(layout.slices[id].length, -0.3f, 0.1f));
    }
    std::vector<std::span<const float>> init_spans(init.begin(), init.end()), grad_spans(grad.begin(), grad.end());
    a.init(config, init_spans);
    a.apply(grad_spans);
    a.apply(grad_spans);
    REQUIRE(a.save(path));

    psd::ShardState b(layout, 1, tensors);
    REQUIRE(b.load(path));
    CHECK(b.step() == 2);
    CHECK(b.last_step() == 50);
    CHECK(b.config().optimizer.kind == OptimizerKind::kAdam);
    a.apply(grad_spans);  // one more step on both: equal only if slots and Adam's t were restored
    b.apply(grad_spans);
    for (std::size_t k = 0; k < a.slice_ids().size(); ++k) {
        const auto pa = a.param_slice(k), pb = b.param_slice(k);
        CHECK(std::equal(pa.begin(), pa.end(), pb.begin()));
        CHECK(b.updates(k) == 3);
    }

    psd::ShardState other_shard(layout, 0, tensors);
    auto wrong = other_shard.load(path);
    REQUIRE_FALSE(wrong);
    CHECK_THAT(wrong.error().message, Catch::Contains("another model, shard or shard count"));

    {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        const auto at = static_cast<std::streamoff>(std::filesystem::file_size(path) - 100);
        f.seekg(at);
        const char old = static_cast<char>(f.get());
        f.seekp(at);
        f.put(static_cast<char>(old ^ 0x01));
    }
    psd::ShardState c(layout, 1, tensors);
    auto damaged = c.load(path);
    REQUIRE_FALSE(damaged);
    CHECK_THAT(damaged.error().message, Catch::Contains("ps-1.shard"));
    CHECK_FALSE(c.initialized());

    std::vector<std::vector<float>> huge;  // finite, but overflows the parameters to Inf
    for (auto id : a.slice_ids()) huge.push_back(std::vector<float>(layout.slices[id].length, -3e38f));
    wire::InitConfig sgd;
    sgd.optimizer = OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = 10.0f};
    a.init(sgd, init_spans);
    a.apply(std::vector<std::span<const float>>(huge.begin(), huge.end()));
    const std::string inf_path = dir + "/inf.shard";
    auto refused = a.save(inf_path);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message, Catch::Contains("NaN or Inf"));
    CHECK_FALSE(std::filesystem::exists(inf_path));
    std::filesystem::remove_all(dir);
}

TEST_CASE("version 5 and 6 shard files (before weight decay, before the moving average) still load", "[psd][shard]") {
    // What each older version's INIT body lacks at its end: 6 the moving average's decay (f32) and
    // the parameter group count (u16); 5 also weight decay f32, its selection u8 and the clipping norm f32.
    const auto [version, missing] = GENERATE(std::pair{6.0f, std::size_t{6}}, std::pair{5.0f, std::size_t{15}});
    const auto tensors = psrun::test::small_model();
    const auto layout = *compute_layout(tensors, 2);
    const std::string dir = psrun::test::make_temp_dir();
    const std::string path = dir + "/ps-1.shard";
    psd::ShardState a(layout, 1, tensors);
    wire::InitConfig config;
    config.optimizer = OptimizerConfig{.kind = OptimizerKind::kMomentum, .learning_rate = 1e-2f};
    std::vector<std::vector<float>> init;
    for (auto id : a.slice_ids()) init.push_back(psrun::test::ramp(layout.slices[id].length, 0.5f));
    a.init(config, std::vector<std::span<const float>>(init.begin(), init.end()));
    REQUIRE(a.save(path));

    // The file as that version's psd wrote it: its meta without the INIT body's last bytes, one float per byte.
    auto file = read_tensor_file(path);
    REQUIRE(file);
    REQUIRE((*file)[0].name == "meta");
    auto& meta = (*file)[0];
    REQUIRE(meta.data[0] == 10.0f);  // the current version
    meta.data[0] = version;
    meta.data.resize(meta.data.size() - missing);
    meta.shape = {meta.data.size()};
    std::vector<TensorView> views;
    for (const auto& t : *file) views.push_back({t.name, t.shape, t.data});
    REQUIRE(write_tensor_file(path, views));

    psd::ShardState b(layout, 1, tensors);
    auto loaded = b.load(path);
    INFO((loaded ? std::string() : loaded.error().message));
    REQUIRE(loaded);
    CHECK(b.config().optimizer.kind == OptimizerKind::kMomentum);
    CHECK(b.config().optimizer.weight_decay == 0.0f);
    CHECK(b.config().optimizer.clip_global_norm == 0.0f);
    CHECK(b.config().optimizer.ema_decay == 0.0f);
    CHECK_FALSE(b.average().enabled());
    std::filesystem::remove_all(dir);
}
