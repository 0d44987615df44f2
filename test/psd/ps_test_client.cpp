// A tiny psd client for process tests: HELLO, INIT (chief), a few SGD steps on a small model,
// then DONE, or hang forever (--hang) so that a test can SIGKILL it, or stay silent for
// --silent-before-done S seconds first (a worker whose network went away and came back).
// Prints "step=<global step> first=<first parameter>" once training is over.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/job_keys.h"
#include "common/ps_client.h"

int main(int argc, char** argv) {
    psrun::PsClientOptions o;
    o.tensors = {{"w", {100, 90}}, {"b", {10}}};
    o.connect_timeout = std::chrono::milliseconds(5000);
    o.reply_timeout = std::chrono::milliseconds(10000);
    int steps = 3;
    bool hang = false, restored = false;
    double silent = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const char* next = i + 1 < argc ? argv[i + 1] : "";
        if (a == "--ps") {
            std::string list = next;
            for (std::size_t p = 0; p != std::string::npos;) {
                const auto c = list.find(',', p);
                o.endpoints.push_back(list.substr(p, c == std::string::npos ? c : c - p));
                p = c == std::string::npos ? c : c + 1;
            }
            ++i;
        } else if (a == "--index") {
            o.index = static_cast<std::uint32_t>(std::stoul(next));
            ++i;
        } else if (a == "--steps") {
            steps = std::stoi(next);
            ++i;
        } else if (a == "--key-file") {
            auto keys = psrun::read_job_key_file(next);
            if (!keys) {
                std::fprintf(stderr, "%s\n", keys.error().message.c_str());
                return 2;
            }
            o.keys = *keys;
            ++i;
        } else if (a == "--silent-before-done") {
            silent = std::stod(next);
            ++i;
        } else if (a == "--hang") {
            hang = true;
        } else if (a == "--restored") {
            restored = true;
        } else {
            std::fprintf(stderr, "unknown argument %s\n", a.c_str());
            return 2;
        }
    }
    o.role = o.index == 0 ? psrun::wire::Role::kChief : psrun::wire::Role::kWorker;
    auto fail = [](const psrun::Error& e) {
        std::fprintf(stderr, "ps_test_client: %s\n", e.message.c_str());
        return 1;
    };
    psrun::PsClient client(o);
    if (auto r = client.hello(); !r) return fail(r.error());
    const std::size_t n = client.layout().total;
    std::vector<float> params(n, 1.0f), grads(n, 1.0f);
    psrun::wire::InitConfig config;
    config.optimizer = psrun::OptimizerConfig{.kind = psrun::OptimizerKind::kSgd, .learning_rate = 0.125f};
    if (o.index == 0) {
        auto r = restored ? client.init_restored(config) : client.init(config, params);
        if (!r) return fail(r.error());
    }
    auto pulled = client.pull(params);
    if (!pulled) return fail(pulled.error());
    std::uint64_t step = pulled->step;
    for (int s = 0; s < steps; ++s) {
        auto r = client.push_pull(grads, step, params);
        if (!r) return fail(r.error());
        step = r->step;
    }
    std::printf("step=%llu first=%.6f\n", static_cast<unsigned long long>(step), static_cast<double>(params[0]));
    std::fflush(stdout);
    if (hang)
        while (true) ::pause();
    std::this_thread::sleep_for(std::chrono::duration<double>(silent));
    if (auto r = client.done(); !r) return fail(r.error());
    return 0;
}
