#include "common/checkpoint_params.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <utility>

#include "common/checkpoint_store.h"
#include "common/tensor_file.h"

namespace psrun {
namespace {

Error invalid(const std::string& message) { return Error{ErrorCode::kInvalidArgument, message}; }

}  // namespace

std::string piece_base_name(const std::string& tensor, std::uint64_t offset, std::uint64_t length) {
    return tensor + "@" + std::to_string(offset) + "+" + std::to_string(length);
}

bool parse_piece_name(const std::string& name, PieceName& out) {
    const auto slash = name.rfind('/');
    if (slash == std::string::npos) return false;
    const auto at = name.rfind('@', slash);
    if (at == std::string::npos || at == 0) return false;
    const auto plus = name.find('+', at);
    if (plus == std::string::npos || plus > slash) return false;
    const std::string off = name.substr(at + 1, plus - at - 1);
    const std::string len = name.substr(plus + 1, slash - plus - 1);
    auto digits = [](const std::string& s) {
        return !s.empty() && s.size() <= 19 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (!digits(off) || !digits(len)) return false;
    out.tensor = name.substr(0, at);
    out.offset = std::stoull(off);
    out.length = std::stoull(len);
    out.part = name.substr(slash + 1);
    return out.length > 0;
}

Result<CheckpointParameters> load_checkpoint_parameters(const std::string& dir,
                                                        const std::vector<TensorSpec>& tensors) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
        return make_error(ErrorCode::kNotFound, "checkpoint " + dir + " is not a directory");
    auto manifest = CheckpointStore::read_manifest(CheckpointInfo{0, dir});
    if (!manifest) return tl::unexpected(manifest.error());
    CheckpointParameters out;
    const auto step = manifest->find("step");
    if (step == manifest->end() || !step->is_number_integer())
        return make_error(ErrorCode::kInvalidArgument, dir + "/manifest.json: no integer \"step\"");
    out.step = step->get<std::int64_t>();

    std::map<std::string, std::size_t> index;  // tensor name -> position in `tensors`
    std::vector<std::size_t> base(tensors.size());  // flat offset of each tensor
    std::size_t total = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        index[tensors[i].name] = i;
        base[i] = total;
        total += tensors[i].elements();
    }
    out.values.assign(total, 0.0f);
    std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> covered(tensors.size());

    for (const auto& f : (*manifest)["files"]) {
        if (!f.is_string()) return make_error(ErrorCode::kInvalidArgument, dir + "/manifest.json: bad \"files\" entry");
        const std::string name = f.get<std::string>();
        if (!name.starts_with("ps-") || !name.ends_with(".tensors")) continue;  // not a psd shard file
        const std::string path = dir + "/" + name;
        auto read = read_tensor_file(path);
        if (!read) return tl::unexpected(read.error());
        ++out.shards;
        for (const NamedTensor& t : *read) {
            PieceName piece;
            if (!parse_piece_name(t.name, piece)) return tl::unexpected(invalid(path + ": unexpected tensor '" + t.name + "'"));
            if (piece.part != "param") continue;
            const auto it = index.find(piece.tensor);
            if (it == index.end())
                return tl::unexpected(invalid(path + ": tensor '" + piece.tensor + "' is not part of this model"));
            const std::size_t k = it->second;
            if (piece.offset + piece.length > tensors[k].elements() || t.data.size() != piece.length)
                return tl::unexpected(invalid(path + ": piece '" + t.name + "' does not fit tensor '" + piece.tensor +
                                              "' of " + std::to_string(tensors[k].elements()) + " floats"));
            if (!std::all_of(t.data.begin(), t.data.end(), [](float v) { return std::isfinite(v); }))
                return tl::unexpected(invalid(path + ": '" + t.name + "' holds NaN or Inf"));
            std::copy(t.data.begin(), t.data.end(), out.values.begin() + static_cast<std::ptrdiff_t>(base[k] + piece.offset));
            covered[k].emplace_back(piece.offset, piece.length);
        }
    }
    if (out.shards == 0) return make_error(ErrorCode::kInvalidArgument, "checkpoint " + dir + " lists no psd shard file");
    for (std::size_t k = 0; k < tensors.size(); ++k) {
        auto& pieces = covered[k];
        std::sort(pieces.begin(), pieces.end());
        std::uint64_t next = 0;
        for (const auto& [offset, length] : pieces) {
            if (offset < next)
                return tl::unexpected(invalid("checkpoint " + dir + ": pieces of '" + tensors[k].name + "' overlap at " +
                                              std::to_string(offset)));
            if (offset > next) break;
            next = offset + length;
        }
        if (next != tensors[k].elements())
            return tl::unexpected(invalid("checkpoint " + dir + " does not hold all of '" + tensors[k].name + "': floats [" +
                                          std::to_string(next) + ", ...) are missing"));
    }
    return out;
}

}  // namespace psrun
