// The single-process side of `psrun bench cluster`: see bench_single.h.
#include "launcher/bench_single.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <iostream>
#include <stdexcept>
#include <string>

#include "common/unique_fd.h"
#include "common/utf8.h"
#include "workerd/datasets.h"
#include "workerd/train_options.h"
#include "workerd/trainer.h"

namespace psrun::launcher {

using Clock = std::chrono::steady_clock;

namespace {

// The same trainer in this process: warm-up steps, then the timed ones.
nlohmann::json run_single(const SingleRunOptions& o) {
    worker::TrainOptions t;
    t.data_dir = o.data_dir;
    t.dataset = o.dataset;
    t.batch_size = o.batch_size;
    t.steps = o.steps;
    t.threads = o.threads;
    t.precision = o.precision;
    const worker::TrainerConfig config = worker::make_trainer_config(t);
    worker::set_compute_threads(o.threads);
    auto data = worker::load_datasets(t, worker::model_input(*config.model));
    if (!data) throw std::runtime_error(data.error().message);
    worker::Trainer trainer(config, worker::make_train_source(*data, config), worker::make_test_source(*data));
    for (int i = 0; i < o.warmup_steps; ++i) {
        trainer.compute_gradients();
        trainer.apply_gradients();
    }
    const int measured = o.steps - o.warmup_steps;
    const auto t0 = Clock::now();
    for (int i = 0; i < measured; ++i) {
        trainer.compute_gradients();
        trainer.apply_gradients();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return {{"images_per_sec", double(measured) * o.batch_size / seconds},
            {"measured_steps", measured},
            {"measured_seconds", seconds}};
}

}  // namespace

nlohmann::json run_single_in_child(const SingleRunOptions& o) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    UniqueFd read_end(fds[0]), write_end(fds[1]);
    std::cout.flush();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
        read_end.reset();
        int code = 0;
        std::string text;
        try {
            text = json_text(run_single(o));
        } catch (const std::exception& e) {
            text = json_text(nlohmann::json{{"error", e.what()}});
            code = 1;
        }
        for (std::size_t done = 0; done < text.size();) {
            const ssize_t n = ::write(write_end.get(), text.data() + done, text.size() - done);
            if (n <= 0) break;
            done += static_cast<std::size_t>(n);
        }
        ::_exit(code);
    }
    write_end.reset();
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(read_end.get(), buf, sizeof buf)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        text.append(buf, static_cast<std::size_t>(n));
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        throw std::runtime_error("the single-process run died (wait status " + std::to_string(status) + ")");
    if (j.contains("error"))
        throw std::runtime_error("the single-process run failed: " + j["error"].get<std::string>());
    return j;
}

}  // namespace psrun::launcher
