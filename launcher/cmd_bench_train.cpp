#include "launcher/cmd_bench_train.h"

#include <exception>
#include <iostream>
#include <memory>

#include "common/option_checks.h"
#include "common/result.h"
#include "common/utf8.h"
#include "workerd/bench.h"

namespace psrun::launcher {

void add_bench_train_command(CLI::App& app, int& exit_code) {
    auto found = app.get_subcommands([](CLI::App* sub) { return sub->get_name() == "bench"; });
    CLI::App* bench = found.empty() ? app.add_subcommand("bench", "benchmarks") : found.front();
    bench->require_subcommand(1);
    auto o = std::make_shared<worker::BenchOptions>();
    CLI::App* train =
        bench->add_subcommand("train", "training-step throughput of the worker's compute engine (one JSON line)");
    train->add_option("--model", o->model, "a built-in model (psrun model list) or a model file")
        ->capture_default_str();
    train->add_option("--batch-size", o->batch_size, "examples per step")
        ->check(integer_in(1, 65536))
        ->capture_default_str();
    train->add_option("--threads", o->threads, "OpenMP compute threads")->check(thread_count(1))->capture_default_str();
    train->add_option("--precision", o->precision, "f32 or bf16")->capture_default_str();
    train->add_option("--steps", o->steps, "measured steps")->check(integer_in(1, 1000000))->capture_default_str();
    train->add_option("--warmup-steps", o->warmup_steps, "unmeasured steps first")
        ->check(integer_in(0, 1000000))
        ->capture_default_str();
    train
        ->add_option("--hand-kernels", o->hand_kernels,
                     "hand-written kernels (AVX-512 or AVX2 + FMA) where a layer pattern matches one and the CPU "
                     "allows (1), or oneDNN "
                     "primitives only (0)")
        ->capture_default_str();
    train
        ->add_option(
            "--peak", o->peak,
            "sample this host's f32/bf16 FMA peak between the measured steps (~20 ms every 10 steps, not timed) and "
            "report the run as a fraction of its median (1), or not (0)")
        ->capture_default_str();
    train->callback([o, &exit_code] {
        try {
            std::cout << json_text(worker::run_train_benchmark(*o)) << std::endl;
            exit_code = kExitOk;
        } catch (const UsageError& e) {
            std::cerr << "psrun bench train: " << e.what() << "\n";
            exit_code = kExitUsage;
        } catch (const std::exception& e) {
            std::cerr << "psrun bench train: " << e.what() << "\n";
            exit_code = kExitFailure;
        }
    });
}

}  // namespace psrun::launcher
