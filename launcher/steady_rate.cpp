#include "launcher/steady_rate.h"

#include <fstream>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace psrun::launcher {

Result<SteadyRate> steady_rate_from_metrics(const std::string& metrics_path, int batch_size, std::int64_t from_step,
                                            std::int64_t before_step) {
    std::ifstream in(metrics_path);
    if (!in) return make_error(ErrorCode::kNotFound, metrics_path + ": missing (did the chief get --model-dir?)");
    std::optional<std::pair<std::int64_t, double>> first, last;
    for (std::string line; std::getline(in, line);) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("images_per_sec") || !j.contains("step") ||
            !j.contains("time") || !j["step"].is_number_integer() || !j["time"].is_number())
            continue;
        const auto step = j["step"].get<std::int64_t>();
        if (step < from_step || step >= before_step) continue;
        const std::pair<std::int64_t, double> record{step, j["time"].get<double>()};
        if (!first) first = record;
        last = record;
    }
    if (!first || last->first <= first->first || last->second <= first->second)
        return make_error(ErrorCode::kNotFound,
                          fmt::format("{}: fewer than two progress records between steps {} and {}: raise --steps",
                                      metrics_path, from_step, before_step));
    SteadyRate r;
    r.first_step = first->first;
    r.last_step = last->first;
    r.seconds = last->second - first->second;
    r.images_per_sec = double(r.last_step - r.first_step) * batch_size / r.seconds;
    return r;
}

}  // namespace psrun::launcher
