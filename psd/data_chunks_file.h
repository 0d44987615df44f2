// The data dispenser's state in a checkpoint (issue 38, docs/reliability.md "Elastic membership"):
// psd 0 writes <checkpoint dir>/data-chunks.tensors beside its shard file on SAVE, so the file is
// listed in the manifest and its CRCs are verified by CheckpointStore::latest_valid() like every
// other tensor file of the checkpoint (a damaged one makes the checkpoint damaged). The state is
// stored as 16-bit digits, each an integral float in [0, 65535] (exact in f32):
//   data_chunks/header  [9, 4]   the words version (1), examples, chunks, seed, next epoch,
//                                epochs complete, epochs inexact, stale reports, chunks leased
//   data_chunks/closed  [n, 12]  per kept complete epoch: the words epoch, examples, chunks done
//   data_chunks/open    [m, 4 + ceil(chunks / 16)]  per open epoch: the word epoch, then its done
//                                chunks as a bitmap (chunk c is bit c % 16 of digit c / 16)
// A word is 4 digits, least significant first. Every field is checked (DataChunks::restore);
// any problem is kInvalidArgument naming the file. The same three tensors also end psd 0's standby
// shard file (psd/shard_state_file.cpp, `ps-0.shard`). Free functions, no state.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/tensor_file.h"
#include "psd/data_chunks.h"

namespace psrun::psd {

inline constexpr const char* kDataChunksFile = "data-chunks.tensors";

// The file's bytes (common/tensor_file.h format) for `state`.
std::string encode_data_chunks(const DataChunks::State& state);
// Parses and checks the bytes of a data-chunks file (`path` names it in errors).
// decode(encode(s)) == s for every state a DataChunks produced.
[[nodiscard]] Result<DataChunks::State> decode_data_chunks(std::string_view bytes, const std::string& path);

// The three tensors above for `state`, in that order (what encode_data_chunks() writes), for a
// file that holds them beside others.
std::vector<NamedTensor> data_chunks_tensors(const DataChunks::State& state);
inline constexpr std::size_t kDataChunksTensors = 3;
// True when `name` is the first of those tensors' names (data_chunks/header).
bool is_data_chunks_header(std::string_view name);
// Parses and checks those three tensors, in that order, read from `path`: kInvalidArgument
// "<path>: not a valid data chunk state (<why>)". decode(data_chunks_tensors(s)) == s.
[[nodiscard]] Result<DataChunks::State> decode_data_chunks_tensors(std::span<const NamedTensor> tensors,
                                                                   const std::string& path);

// Writes `chunks`' state to <dir>/data-chunks.tensors, fsynced (kIo naming the path).
[[nodiscard]] Result<void> save_data_chunks(const DataChunks& chunks, const std::string& dir);
// The dispenser restored from <dir>/data-chunks.tensors; nullopt when the checkpoint has none
// (written without --data-chunks, or by a psrun from before the state was kept).
[[nodiscard]] Result<std::optional<DataChunks>> load_data_chunks(const std::string& dir);

}  // namespace psrun::psd
