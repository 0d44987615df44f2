// Test helpers: in-process psd servers on ipc endpoints in a temp dir, and clients for them.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/ps_client.h"
#include "psd/parameter_server.h"

namespace psrun::test {

inline std::string make_temp_dir() {
    char tmpl[] = "/tmp/psrun-psd-XXXXXX";
    return ::mkdtemp(tmpl);
}

// A temporary directory (a model dir) removed with everything in it at the end of the test.
struct TempModelDir {
    std::string path = make_temp_dir();
    TempModelDir() = default;
    TempModelDir(const TempModelDir&) = delete;
    TempModelDir& operator=(const TempModelDir&) = delete;
    ~TempModelDir() { std::filesystem::remove_all(path); }
};

// K servers running in threads. Destruction stops them.
class Cluster {
  public:
    // transport "ipc" (sockets in a temp dir) or "tcp" (127.0.0.1, ports chosen by the kernel).
    Cluster(std::uint32_t shards, psd::ServerOptions base, const std::string& transport = "ipc")
        : dir_(make_temp_dir()) {
        for (std::uint32_t i = 0; i < shards; ++i)
            endpoints_.push_back(transport == "tcp" ? "tcp://127.0.0.1:*"
                                                    : "ipc://" + dir_ + "/ps" + std::to_string(i));
        for (std::uint32_t i = 0; i < shards; ++i) {
            auto o = base;
            o.index = i;
            o.endpoints = endpoints_;
            servers_.push_back(std::make_unique<psd::ParameterServer>(o));
        }
        for (std::uint32_t i = 0; i < shards; ++i) endpoints_[i] = servers_[i]->endpoint();
        for (auto& s : servers_) {
            auto* raw = s.get();
            exits_.push_back(std::async(std::launch::async, [raw] { return raw->run(); }));
        }
    }
    ~Cluster() {
        for (auto& s : servers_) s->stop();
        for (auto& e : exits_)
            if (e.valid()) e.wait();
        servers_.clear();
        std::filesystem::remove_all(dir_);
    }
    const std::vector<std::string>& endpoints() const { return endpoints_; }
    const std::string& dir() const { return dir_; }
    // Exit code of server i, waiting at most `seconds`; -1 if it is still running.
    int exit_code(std::size_t i, double seconds) {
        if (exits_[i].wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) return -1;
        return exits_[i].get();
    }

    PsClientOptions client_options(std::uint32_t index, std::vector<TensorSpec> tensors) const {
        PsClientOptions o;
        o.endpoints = endpoints_;
        o.index = index;
        o.role = index == 0 ? wire::Role::kChief : wire::Role::kWorker;
        o.tensors = std::move(tensors);
        o.connect_timeout = std::chrono::milliseconds(5000);
        o.reply_timeout = std::chrono::milliseconds(10000);
        return o;
    }

  private:
    std::string dir_;
    std::vector<std::string> endpoints_;
    std::vector<std::unique_ptr<psd::ParameterServer>> servers_;
    std::vector<std::future<int>> exits_;
};

// Server options for `workers` workers with a worker timeout no test step comes near.
inline psd::ServerOptions base_options(std::uint32_t workers) {
    psd::ServerOptions o;
    o.num_workers = workers;
    o.worker_timeout = std::chrono::milliseconds(30000);
    return o;
}

// INIT for plain SGD at `lr`, updates stopping at `last_step` (0: no limit).
inline wire::InitConfig sgd(float lr, std::uint64_t last_step = 0) {
    wire::InitConfig c;
    c.optimizer = OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = lr};
    c.last_step = last_step;
    return c;
}

// INIT for Adam at `lr`, updates from `start_step` (the first step's number) up to `last_step`
// (0: no limit).
inline wire::InitConfig adam(float lr, std::uint64_t last_step = 0, std::uint64_t start_step = 0) {
    wire::InitConfig c;
    c.optimizer = OptimizerConfig{.kind = OptimizerKind::kAdam, .learning_rate = lr};
    c.start_step = start_step;
    c.last_step = last_step;
    return c;
}

// A dense tensor "fc/w" [8, 5] and a table "emb" [rows, width]: a sparse one (rows on psd, drawn
// from N(0, 0.05^2) with seed 9) or, with sparse false, the same shape dense.
inline std::vector<TensorSpec> sparse_model(std::uint32_t rows, std::uint32_t width, bool sparse = true) {
    std::vector<TensorSpec> t = {{"fc/w", {8, 5}}, {"emb", {rows, width}}};
    if (sparse) {
        t[1].kind = TensorKind::kRows;
        t[1].row_init = RowInit{RowInitKind::kNormal, 0.05f, 9};
    }
    return t;
}

inline std::vector<TensorSpec> small_model() { return {{"w", {100, 90}}, {"b", {10}}, {"v", {7}}}; }

inline std::vector<float> ramp(std::size_t n, float scale, float offset = 0.0f) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>(i % 97) / 97.0f;
    return v;
}

}  // namespace psrun::test
