// How a run's batch source spent the training thread's time, as the end-of-run log and
// summary.json report it (docs/data.md "Waiting for data").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "workerd/data/batch_source.h"

namespace psrun::worker {

// "waited 0.20 s for batches (0.38% of 53.1 s of training, longest 200.3 ms); handling them
// took 0.95 s (1.79%)", with ", skipped N corrupt records" when there were any.
std::string describe_data_time(const BatchSource& source, double train_seconds);

// {"data_wait_seconds", "data_wait_percent", "data_max_wait_ms", "data_handling_seconds",
// "data_handling_percent", "skipped_records"}; percentages of train_seconds (0 when it is 0).
nlohmann::json data_time_json(const BatchSource& source, double train_seconds);

}  // namespace psrun::worker
