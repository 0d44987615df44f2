#include "common/logging.h"

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace psrun {

void init_logging(const std::string& component, int index, const std::string& level) {
    auto logger = spdlog::stderr_color_mt(component);
    const std::string tag = index < 0 ? component : component + ":" + std::to_string(index);
    logger->set_pattern("%H:%M:%S.%e %^%l%$ [" + tag + "] %v");
    logger->set_level(spdlog::level::from_str(level));
    spdlog::set_default_logger(logger);
    spdlog::cfg::load_env_levels();
    spdlog::flush_on(spdlog::level::warn);
}

}  // namespace psrun
