// The only translation unit with Catch2's runner; every test executable links it.
#define CATCH_CONFIG_RUNNER
#include <spdlog/cfg/env.h>
#include <spdlog/spdlog.h>
#include <catch2/catch.hpp>

int main(int argc, char** argv) {
    spdlog::set_level(spdlog::level::warn);
    spdlog::cfg::load_env_levels();
    return Catch::Session().run(argc, argv);
}
