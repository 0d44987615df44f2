#include "launcher/model_memory.h"

#include <cstdio>
#include <vector>

namespace psrun::launcher {

namespace {

// Decimal units: "6.1 MB", "47.9 KB".
std::string bytes_text(double bytes) {
    const char* units[] = {"B", "KB", "MB", "GB", "TB"};
    int u = 0;
    while (bytes >= 1000.0 && u < 4) {
        bytes /= 1000.0;
        ++u;
    }
    char text[32];
    std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
    return text;
}

std::string figure(std::size_t bytes, std::int64_t batch) {
    return bytes_text(static_cast<double>(bytes)) + " = " +
           bytes_text(static_cast<double>(bytes) / static_cast<double>(batch)) + " per example";
}

}  // namespace

Result<nn::MemoryUse> training_memory(const nn::ModelDescription& model, std::int64_t batch) {
    const auto count = static_cast<std::size_t>(model.parameter_count);
    std::vector<float> params(count, 0.0f), grads(count, 0.0f);
    nn::NetworkOptions options;
    options.batch_size = batch;
    PSRUN_TRY_ASSIGN(auto net, nn::Network::create(model, options, params, grads));
    return net->memory_use();
}

std::string training_memory_text(const nn::MemoryUse& use, std::int64_t batch) {
    std::string text =
        "training memory (activations, their gradients, temporaries; batch " + std::to_string(batch) + ", f32): ";
    if (use.planned)
        text +=
            "planned " + figure(use.planned_bytes, batch) + "; one buffer each " + figure(use.unplanned_bytes, batch);
    else if (use.plan_failed)
        text +=
            "one buffer each (the buffer plan failed for this network: an engine defect worth reporting; it trains "
            "right, in more memory) " +
            figure(use.unplanned_bytes, batch);
    else text += "one buffer each (planning off) " + figure(use.unplanned_bytes, batch);
    return text;
}

nlohmann::json training_memory_json(const nn::MemoryUse& use, std::int64_t batch) {
    const auto per = [batch](std::size_t bytes) { return static_cast<double>(bytes) / static_cast<double>(batch); };
    return {{"batch", batch},
            {"planned", use.planned},
            {"plan_failed", use.plan_failed},
            {"planned_bytes", use.planned_bytes},
            {"unplanned_bytes", use.unplanned_bytes},
            {"lower_bound_bytes", use.lower_bound},
            {"planned_bytes_per_example", per(use.planned_bytes)},
            {"unplanned_bytes_per_example", per(use.unplanned_bytes)}};
}

}  // namespace psrun::launcher
