// A whole split decoded into memory (--stream off, or an image folder that fits
// --stream-memory-mb): the producer's records are read in groups of 4096 on the calling thread
// and each group is decoded on `threads` threads (the examples keep their record order).
#pragma once

#include <cstdint>
#include <memory>

#include "common/result.h"
#include "workerd/data/labeled_images.h"
#include "workerd/data/record_producer.h"
#include "workerd/data/stream_pipeline.h"

namespace psrun::worker {

// Every record of `producer` (one pass) decoded with `config`'s layout, keys and resize into
// memory (normalization set from `config`). Undecodable records fail (the error names the file
// and record), or are skipped and counted in `skipped` under CorruptRecords::kSkip (the
// producer's own skips included). An exception on a decode thread fails the pass (an error, not terminate).
[[nodiscard]] Result<std::shared_ptr<LabeledImages>> decode_all(RecordProducer& producer, const PipelineConfig& config,
                                                                int threads, std::uint64_t& skipped);

}  // namespace psrun::worker
