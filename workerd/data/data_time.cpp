#include "workerd/data/data_time.h"

#include <fmt/format.h>

namespace psrun::worker {
namespace {

double percent_of(double part, double whole) { return whole > 0 ? 100 * part / whole : 0.0; }

}  // namespace

std::string describe_data_time(const BatchSource& source, double train_seconds) {
    const DataTime t = source.data_time();
    std::string out = fmt::format(
        "waited {:.2f} s for batches ({:.2f}% of {:.1f} s of training, longest {:.1f} ms); handling them took "
        "{:.2f} s ({:.2f}%)",
        t.waited, percent_of(t.waited, train_seconds), train_seconds, 1000 * t.longest_wait, t.handling,
        percent_of(t.handling, train_seconds));
    if (const auto skipped = source.skipped_records()) out += fmt::format(", skipped {} corrupt records", skipped);
    return out;
}

nlohmann::json data_time_json(const BatchSource& source, double train_seconds) {
    const DataTime t = source.data_time();
    return {{"data_wait_seconds", t.waited},
            {"data_wait_percent", percent_of(t.waited, train_seconds)},
            {"data_max_wait_ms", 1000 * t.longest_wait},
            {"data_handling_seconds", t.handling},
            {"data_handling_percent", percent_of(t.handling, train_seconds)},
            {"skipped_records", source.skipped_records()}};
}

}  // namespace psrun::worker
