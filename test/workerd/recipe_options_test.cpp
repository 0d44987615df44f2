// The recipe layers of the training options (workerd/train_options.h resolve_model, merge_recipe;
// workerd/run_recipe.h): the command line wins over --recipe F, which wins over the model's
// recipe, field by field, the schedule and the batch each as one choice; the effective recipe a
// run records reads back through --recipe to the same recipe; a bad file is a usage error naming
// the file and the field.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/result.h"
#include "workerd/run_recipe.h"
#include "workerd/train_options.h"

namespace psrun::worker {
namespace {

namespace fs = std::filesystem;
using Catch::Contains;

struct TempDir {
    fs::path path;
    TempDir() {
        std::string t = (fs::temp_directory_path() / "recipe-test-XXXXXX").string();
        REQUIRE(mkdtemp(t.data()) != nullptr);
        path = t;
    }
    ~TempDir() { fs::remove_all(path); }
    std::string write(const std::string& name, const std::string& text) const {
        std::ofstream(path / name) << text;
        return (path / name).string();
    }
};

// A one-layer MNIST model whose recipe is `recipe` (JSON text).
std::string model_with_recipe(const TempDir& dir, const std::string& recipe) {
    return dir.write("tiny.json",
                     R"({"name": "tiny", "input": {"channels": 1, "height": 28, "width": 28}, "classes": 10,
        "layers": [{"kind": "dense", "units": 10}], "loss": {"kind": "softmax_cross_entropy"}, "recipe": )" +
                         recipe + "}");
}

// The options after parsing `args` and resolve_model (+ --global-batch-size over `workers`).
TrainOptions resolved(CLI::App& app, const std::string& args, std::uint32_t workers = 1) {
    TrainOptions o;
    add_train_options(app, o);
    app.parse(args, false);
    resolve_model(app, o);
    apply_global_batch_size(app, o, workers);
    return o;
}

const char* kModelRecipe = R"({"optimizer": "nesterov", "learning_rate": 0.01, "momentum": 0.8, "steps": 100,
    "batch_size": 20, "weight_decay": 5e-4, "lr_decay": {"rate": 0.9, "steps": 10}, "lr_warmup_steps": 3,
    "ema_decay": 0.5, "label_smoothing": 0.1})";
const char* kFileRecipe = R"({"recipe": {"learning_rate": 0.05, "steps": 50, "lr_schedule": "cosine:steps=50,warmup=5",
    "clip_global_norm": 2, "param_groups": ["*/b:lr_mult=0"], "global_batch_size": 60, "weight_decay_on": "all"}})";

}  // namespace

TEST_CASE("recipe layers: command line > --recipe file > the model's recipe, field by field", "[recipe]") {
    TempDir dir;
    const std::string model = model_with_recipe(dir, kModelRecipe);
    const std::string file = dir.write("r.json", kFileRecipe);
    CLI::App app;
    const TrainOptions o = resolved(app, "--model " + model + " --recipe " + file + " --steps 7", 2);
    CHECK(o.steps == 7);                // the command line
    CHECK(o.learning_rate == 0.05f);    // the file over the model
    CHECK(o.clip_global_norm == 2.0f);  // the file
    CHECK(o.weight_decay_on == "all");
    CHECK(o.param_groups == std::vector<std::string>{"*/b:lr_mult=0"});
    CHECK(o.optimizer == "nesterov");  // the model, where nothing above gives it
    CHECK(o.momentum == 0.8f);
    CHECK(o.weight_decay == 5e-4f);
    CHECK(o.ema_decay == 0.5f);
    CHECK(o.label_smoothing == 0.1f);
    // The schedule is one choice: the file's cosine; the model's lr_decay does not join it, and its
    // lr_warmup_steps gives way to the file schedule's own warmup=5.
    CHECK(o.lr_schedule == "cosine:steps=50,warmup=5");
    CHECK(o.lr_decay_steps == 0);
    CHECK(o.lr_warmup_steps == 0);
    // The batch too: the file's global batch of 60 over 2 workers; the model's batch_size does not count.
    CHECK(o.global_batch_size == 60);
    CHECK(o.batch_size == 30);
    const TrainerConfig c = make_trainer_config(o);
    CHECK(c.optimizer.schedule.warmup_steps == 5);
    CHECK(c.optimizer.groups.size() == 1);
}

TEST_CASE("recipe layers: the command line's flags of a group win over both recipes", "[recipe]") {
    TempDir dir;
    const std::string model = model_with_recipe(dir, kModelRecipe);
    const std::string file = dir.write("r.json", kFileRecipe);
    CLI::App app;
    const TrainOptions o =
        resolved(app, "--model " + model + " --recipe " + file +
                          " --batch-size 16 --lr-decay-rate 0.5 --lr-decay-steps 4 --optimizer adam");
    CHECK(o.batch_size == 16);
    CHECK(o.global_batch_size == 0);  // the file's global batch gave way to --batch-size
    CHECK(o.lr_schedule.empty());     // --lr-decay-* decided the schedule
    CHECK(o.lr_decay_rate == 0.5f);
    CHECK(o.lr_warmup_steps == 3);  // no schedule with its own warm-up: the model's applies
    CHECK(o.optimizer == "adam");
    CHECK_FALSE(o.momentum);  // the model's momentum: adam reads none
    CHECK(make_trainer_config(o).optimizer.kind == OptimizerKind::kAdam);
}

TEST_CASE("recipe layers: without --recipe the model's recipe still fills what the command line leaves", "[recipe]") {
    TempDir dir;
    const std::string model = model_with_recipe(dir, kModelRecipe);
    CLI::App app;
    const TrainOptions o = resolved(app, "--model " + model + " --learning-rate 0.02");
    CHECK(o.learning_rate == 0.02f);
    CHECK(o.steps == 100);
    CHECK(o.batch_size == 20);
    CHECK(o.lr_decay_rate == 0.9f);
    CHECK(o.lr_decay_steps == 10);
    CHECK(o.lr_warmup_steps == 3);
    CHECK(o.momentum == 0.8f);
}

TEST_CASE("the effective recipe: every field the run uses, and --recipe of it gives the same run", "[recipe]") {
    TempDir dir;
    const std::string model = model_with_recipe(dir, kModelRecipe);
    const std::string file = dir.write("r.json", kFileRecipe);
    CLI::App app;
    const TrainOptions o = resolved(app, "--model " + model + " --recipe " + file + " --accumulate-steps 2", 3);
    const nn::Recipe r = effective_recipe(o, make_trainer_config(o));
    CHECK(r.optimizer == "nesterov");
    CHECK(r.learning_rate == 0.05);  // the float's shortest decimal, not 0.0500000007
    CHECK(r.momentum == 0.8);
    CHECK_FALSE(r.beta1);
    CHECK(r.weight_decay == 0.0005);
    CHECK(r.lr_schedule == "cosine:steps=50,alpha=0,warmup=5");
    CHECK(r.lr_warmup_steps == 5);
    CHECK_FALSE(r.lr_decay_rate);
    CHECK(r.global_batch_size == 60);
    CHECK(r.batch_size == 10);  // 60 / (3 workers x 2 micro-batches)
    CHECK(r.accumulate_steps == 2);
    CHECK(r.param_groups == std::vector<std::string>{"*/b:lr_mult=0"});
    CHECK(r.ema_decay == 0.5);
    CHECK(r.clip_global_norm == 2.0);
    CHECK(r.label_smoothing == 0.1);
    CHECK(r.weight_decay_on == "all");
    CHECK(r.steps == 50);

    const std::string run_dir = (dir.path / "run").string();
    REQUIRE(write_run_recipe(run_dir, r));
    auto back = read_run_recipe(run_dir);
    REQUIRE(back);
    REQUIRE(*back);
    CHECK(**back == r);
    // The recorded file as --recipe, on the same model, reproduces the recipe (the model's own fields
    // all give way to it) on another worker count too: the global batch decides.
    CLI::App again_app;
    const TrainOptions again = resolved(again_app, "--model " + model + " --recipe " + run_dir + "/recipe.json", 3);
    CHECK(effective_recipe(again, make_trainer_config(again)) == r);
    CHECK_FALSE(read_run_recipe((dir.path / "none").string()).value());
}

TEST_CASE("the effective recipe of a constant schedule with --lr-decay-* reads back", "[recipe]") {
    TempDir dir;
    const std::string model = model_with_recipe(dir, kModelRecipe);
    CLI::App app;
    const TrainOptions o =
        resolved(app, "--model " + model + " --optimizer adamw --lr-decay-rate 0.5 --lr-decay-steps 8");
    const nn::Recipe r = effective_recipe(o, make_trainer_config(o));
    CHECK(r.lr_schedule == "constant:warmup=3");
    CHECK(r.lr_decay_rate == 0.5);
    CHECK(r.lr_decay_steps == 8);
    CHECK(r.beta2 == 0.999);
    CHECK(r.epsilon == 1e-8);
    CHECK_FALSE(r.momentum);
    CHECK_FALSE(r.global_batch_size);
    CHECK(nn::parse_recipe(nn::to_json(r), "R").value() == r);
}

TEST_CASE("a bad --recipe file is a usage error naming the file and the field", "[recipe]") {
    TempDir dir;
    const std::string model = model_with_recipe(dir, kModelRecipe);
    auto error = [&](const std::string& text) -> std::string {
        const std::string file = dir.write("bad.json", text);
        CLI::App app;
        try {
            resolved(app, "--model " + model + " --recipe " + file, 2);
        } catch (const UsageError& e) {
            return e.what();
        }
        FAIL("no usage error for " << text);
        return "";
    };
    CHECK_THAT(error(R"({"recipe": {"ema_decay": 1.5}})"), Contains("bad.json: recipe: field \"ema_decay\""));
    CHECK_THAT(error(R"({"accumulate_steps": 0})"),
               Contains("--recipe " + (dir.path / "bad.json").string() + ": field \"accumulate_steps\""));
    CHECK_THAT(error("{\n\"steps\": ,}"), Contains("bad.json: JSON syntax error at line 2"));
    CHECK_THAT(error(R"({"global_batch_size": 25})"),
               Contains("the recipe's global_batch_size 25 does not split evenly"));
    CLI::App app;
    CHECK_THROWS_WITH(resolved(app, "--model " + model + " --recipe " + (dir.path / "missing.json").string()),
                      Contains("missing.json: cannot read it"));
}

}  // namespace psrun::worker
