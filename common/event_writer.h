// Writes TensorBoard event files (events.out.tfevents.*) holding scalar summaries, so that
// `tensorboard --logdir <model-dir>` plots psrun's loss and accuracy curves. Only the protobuf
// fields TensorBoard needs are encoded: Event{wall_time=1, step=2, file_version=3, summary=5},
// Summary{value=1}, Summary.Value{tag=1, simple_value=2}.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "common/result.h"

namespace psrun {

class EventWriter {
  public:
    // Creates <dir>/events.out.tfevents.<unix seconds>.<host>.<pid> and writes the file-version
    // record. Throws std::runtime_error if the file cannot be created. Not thread-safe.
    EventWriter(const std::string& dir, const std::string& host);
    ~EventWriter();
    EventWriter(const EventWriter&) = delete;
    EventWriter& operator=(const EventWriter&) = delete;

    void add_scalar(std::string_view tag, std::int64_t step, float value, double wall_time);
    // Flushes buffered records to the kernel (TensorBoard polls the file).
    void flush();
    const std::string& path() const { return path_; }

  private:
    void write_event(const std::string& event);

    std::string path_;
    std::FILE* file_ = nullptr;
};

// Encodes one Event with a single scalar (exposed for tests and for readers).
std::string encode_scalar_event(std::string_view tag, std::int64_t step, float value, double wall_time);

struct ScalarEvent {
    std::string tag;
    std::int64_t step = 0;
    float value = 0;
    double wall_time = 0;
};

// Decodes an Event written by encode_scalar_event(); events without a scalar (the
// file-version record) give an error of kind kNotFound.
[[nodiscard]] Result<ScalarEvent> decode_scalar_event(std::string_view event);

}  // namespace psrun
