// `psrun doctor`: what this binary will run on this host (docs/running.md "Mixed clusters"): the
// ISA it was built for, the CPU's, oneDNN's choice (capped by ONEDNN_MAX_CPU_ISA), whether the
// hand-written kernels (AVX-512 or AVX2) and bf16 run, and whether the CPU can run the binary at all.
#pragma once

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// Registers `doctor` on `app`; its callback sets exit_code (0; 1 when this CPU lacks what the
// build needs, which only a binary built elsewhere can meet).
void add_doctor_command(CLI::App& app, int& exit_code);

}  // namespace psrun::launcher
