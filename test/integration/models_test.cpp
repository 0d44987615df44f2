// Any model through psd, end to end with the real psrun, psd and workerd on real MNIST
// (issue 12, docs/models.md):
//  - `psrun local --ps 2 --workers 2 -- --model dls_mlp` trains the DLS example with its own
//    recipe (Adagrad, summed loss) and every checkpoint records the model;
//  - resuming that model dir with another --model is refused (exit 2, naming both);
//  - the evaluator takes the model from the checkpoints; a different --model is exit 2;
//  - a worker started with another model than the chief's is refused by psd at HELLO (exit 2);
//  - a user's own model file (with a recipe) trains standalone;
//  - the DLS multinode example as its users launched it: one `psrun run` per task, roles from
//    TF_CONFIG (ps and worker only, worker 0 the chief), --model dls_mlp.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_keys.h"
#include "test/integration/integration_util.h"
#include "test/psd/child_process.h"

namespace fs = std::filesystem;
using psrun::test::ChildProcess;

namespace {

fs::path exe(const char* rel) { return psrun::test::build_dir() / rel; }

void fetch_mnist(const fs::path& tmp) {
    ChildProcess fetch(exe("launcher/psrun"), {"data", "fetch"}, (tmp / "fetch.log").string());
    REQUIRE(fetch.wait(300) == 0);
}

nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    REQUIRE(in);
    return nlohmann::json::parse(in);
}

std::vector<fs::path> checkpoints(const fs::path& model_dir) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(model_dir))
        if (e.path().filename().string().rfind("ckpt-", 0) == 0) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

std::string manifest_hash(const fs::path& model_dir);

std::vector<std::string> local_args(const fs::path& model_dir, const std::string& model, int steps) {
    return {"local",
            "--ps",
            "2",
            "--workers",
            "2",
            "--grace",
            "20",
            "--",
            "--model",
            model,
            "--model-dir",
            model_dir.string(),
            "--steps",
            std::to_string(steps),
            "--eval-every",
            "0",
            "--log-every",
            "100",
            "--threads",
            "1",
            "--checkpoint-steps",
            "200",
            "--checkpoint-secs",
            "0"};
}

// The model hash the newest checkpoint's manifest records.
std::string manifest_hash(const fs::path& model_dir) {
    const auto all = checkpoints(model_dir);
    REQUIRE(!all.empty());
    return read_json(all.back() / "manifest.json")["model"]["hash"].get<std::string>();
}

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed).
int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    ::close(fd);
    return ntohs(a.sin_port);
}

}  // namespace

TEST_CASE("the DLS multinode MLP through TF_CONFIG: one psrun run per task, worker 0 the chief",
          "[integration][models][tf_config]") {
    psrun::test::TempTree tmp;
    fetch_mnist(tmp.path);
    const fs::path model_dir = tmp.path / "model";
    const std::string ps = "127.0.0.1:" + std::to_string(free_port());
    const std::string w0 = "127.0.0.1:" + std::to_string(free_port());
    const std::string w1 = "127.0.0.1:" + std::to_string(free_port());
    auto tf_config = [&](const std::string& type, int index) {
        return R"({"cluster": {"ps": [")" + ps + R"("], "worker": [")" + w0 + R"(", ")" + w1 + R"("]}, )" +
               R"("task": {"type": ")" + type + R"(", "index": )" + std::to_string(index) + "}}";
    };
    const std::vector<std::string> args = {
        "run",     "--no-auth", "--",        "--model", "dls_mlp",     "--model-dir", model_dir.string(),
        "--steps", "2000",      "--threads", "1",       "--log-every", "500",         "--checkpoint-secs",
        "0"};
    const char* saved = ::getenv("TF_CONFIG");
    const std::string saved_value = saved ? saved : "";
    std::vector<std::unique_ptr<ChildProcess>> tasks;
    int i = 0;
    for (const auto& [type, index] :
         std::vector<std::pair<std::string, int>>{{"ps", 0}, {"worker", 0}, {"worker", 1}}) {
        ::setenv("TF_CONFIG", tf_config(type, index).c_str(), 1);  // inherited by the next child only
        tasks.push_back(std::make_unique<ChildProcess>(exe("launcher/psrun"), args,
                                                       (tmp.path / ("task" + std::to_string(i++) + ".log")).string()));
    }
    if (saved) ::setenv("TF_CONFIG", saved_value.c_str(), 1);
    else ::unsetenv("TF_CONFIG");
    for (auto& t : tasks) {
        const int code = t->wait(300);
        INFO(t->output());
        CHECK(code == 0);
    }
    const std::string chief_log = tasks[1]->output();
    CHECK_THAT(chief_log, Catch::Contains("worker 0 (chief) of 2") && Catch::Contains("model 'dls_mlp'"));
    const auto summary = read_json(model_dir / "summary.json");
    CHECK(summary["global_step"].get<long>() == 2000);
    WARN("dls_mlp through TF_CONFIG (1 ps + 2 workers, 2,000 steps): test accuracy "
         << summary["test_accuracy"].get<double>());
    CHECK(summary["test_accuracy"].get<double>() > 0.93);
}

TEST_CASE("dls_mlp through psd: recipe, checkpoints with the model, resume and evaluation by model",
          "[integration][models]") {
    psrun::test::TempTree tmp;
    fetch_mnist(tmp.path);
    const fs::path model_dir = tmp.path / "model";
    ChildProcess run(exe("launcher/psrun"), local_args(model_dir, "dls_mlp", 1000), (tmp.path / "run.log").string());
    const int code = run.wait(400);
    const std::string log = run.output();
    INFO(log);
    REQUIRE(code == 0);
    // The recipe in models/dls_mlp.json filled what the command line did not give.
    CHECK_THAT(log, Catch::Contains("model 'dls_mlp' (architecture"));
    CHECK_THAT(log, Catch::Contains("adagrad"));
    const auto summary = read_json(model_dir / "summary.json");
    CHECK(summary["global_step"].get<long>() == 1000);
    CHECK(summary["model"] == "dls_mlp");
    CHECK(summary["model_hash"] == manifest_hash(model_dir));
    CHECK(summary["test_accuracy"].get<double>() > 0.9);
    const auto ckpts = checkpoints(model_dir);
    REQUIRE(!ckpts.empty());
    const auto manifest = read_json(ckpts.back() / "manifest.json");
    CHECK(manifest["model"]["name"] == "dls_mlp");
    CHECK(manifest["model"]["hash"].get<std::string>().size() == 64);
    CHECK(manifest["model"]["description"]["layers"].size() == 3);  // dense, relu, dense

    // Resume with another model: refused before any step, naming both.
    ChildProcess other(exe("launcher/psrun"), local_args(model_dir, "mnist_softmax", 1200),
                       (tmp.path / "other.log").string());
    const int other_code = other.wait(120);
    const std::string other_log = other.output();
    INFO(other_log);
    CHECK(other_code == 2);
    CHECK_THAT(other_log,
               Catch::Contains("holds model 'dls_mlp'") && Catch::Contains("this run trains model 'mnist_softmax'"));
    CHECK(checkpoints(model_dir) == ckpts);  // nothing written

    // The evaluator builds dls_mlp from the checkpoints without being told.
    ChildProcess evaluator(
        exe("workerd/workerd"),
        {"--evaluator", "--model-dir", model_dir.string(), "--steps", "1000", "--threads", "1", "--eval-timeout", "30"},
        (tmp.path / "eval.log").string());
    const int eval_code = evaluator.wait(120);
    const std::string eval_log = evaluator.output();
    INFO(eval_log);
    CHECK(eval_code == 0);
    CHECK_THAT(eval_log, Catch::Contains("evaluator: model 'dls_mlp'"));
    std::ifstream metrics(model_dir / "eval" / "metrics.jsonl");
    double last_accuracy = 0;
    for (std::string line; std::getline(metrics, line);)
        last_accuracy = nlohmann::json::parse(line)["test_accuracy"].get<double>();
    CHECK(last_accuracy == Approx(summary["test_accuracy"].get<double>()).margin(1e-9));

    // An evaluator told another model refuses at once.
    fs::remove_all(model_dir / "eval");
    ChildProcess wrong(exe("workerd/workerd"),
                       {"--evaluator", "--model-dir", model_dir.string(), "--steps", "1000", "--model", "mnist_deep",
                        "--eval-timeout", "30"},
                       (tmp.path / "wrong.log").string());
    CHECK(wrong.wait(60) == 2);
    CHECK_THAT(wrong.output(), Catch::Contains("holds model 'dls_mlp'") && Catch::Contains("--model mnist_deep"));
}

TEST_CASE("a worker with another model than the chief's is refused by psd at HELLO", "[integration][models]") {
    psrun::test::TempTree tmp;
    fetch_mnist(tmp.path);
    const std::string ps = "ipc://" + (tmp.path / "ps-0").string();
    ChildProcess psd(exe("psd/psd"), {"--index", "0", "--ps", ps, "--num-workers", "2", "--no-auth"},
                     (tmp.path / "psd.log").string());
    auto worker_args = [&](int index, const std::string& model) {
        std::vector<std::string> a = {"--index", std::to_string(index), "--ps",    ps,    "--num-workers",
                                      "2",       "--no-auth",           "--model", model, "--steps",
                                      "100000",  "--threads",           "1"};
        if (index == 0) a.push_back("--chief");
        return a;
    };
    ChildProcess chief(exe("workerd/workerd"), worker_args(0, "dls_mlp"), (tmp.path / "chief.log").string());
    REQUIRE(chief.wait_for_output("start barrier", 60));
    ChildProcess stranger(exe("workerd/workerd"), worker_args(1, "mnist_softmax"),
                          (tmp.path / "stranger.log").string());
    const int code = stranger.wait(60);
    const std::string log = stranger.output();
    INFO(log);
    CHECK(code == 2);
    CHECK_THAT(log,
               Catch::Contains("serves model 'dls_mlp'") && Catch::Contains("worker 1 trains model 'mnist_softmax'"));
    chief.signal(SIGKILL);
    chief.wait(10);
    psd.signal(SIGKILL);
    psd.wait(10);
}

TEST_CASE("a user's model file with its recipe trains standalone", "[integration][models]") {
    psrun::test::TempTree tmp;
    fetch_mnist(tmp.path);
    const fs::path file = tmp.path / "tiny_cnn.json";
    std::ofstream(file) << R"({
  "name": "tiny_cnn",
  "input": {"channels": 1, "height": 28, "width": 28},
  "classes": 10,
  "layers": [
    {"kind": "conv2d", "name": "c1", "filters": 8, "kernel": 3, "stride": 2, "padding": "valid"},
    {"kind": "tanh"},
    {"kind": "avg_pool", "window": 3, "stride": 2, "padding": "same"},
    {"kind": "dense", "name": "out", "units": 10}
  ],
  "recipe": {"optimizer": "momentum", "learning_rate": 0.05, "batch_size": 64, "steps": 400}
})";
    const fs::path model_dir = tmp.path / "model";
    ChildProcess run(exe("workerd/workerd"),
                     {"--standalone", "--model", file.string(), "--model-dir", model_dir.string(), "--threads", "1",
                      "--log-every", "100"},
                     (tmp.path / "run.log").string());
    const int code = run.wait(300);
    const std::string log = run.output();
    INFO(log);
    REQUIRE(code == 0);
    CHECK_THAT(log, Catch::Contains("model tiny_cnn") && Catch::Contains("batch 64, 400 steps, momentum 0.05"));
    const auto summary = read_json(model_dir / "summary.json");
    CHECK(summary["model"] == "tiny_cnn");
    CHECK(summary["global_step"].get<long>() == 400);
    CHECK(summary["test_accuracy"].get<double>() > 0.85);
}
