// freeze_initializers (onnx_freeze.h).
#include "workerd/onnx/onnx_freeze.h"

#include <set>

#include <nlohmann/json.hpp>

#include "workerd/onnx/onnx_model.h"

namespace psrun::onnx_io {

namespace {

// Up to four of the graph's float initializers, for a message ("none" when it has none).
std::string some_float_initializers(const onnx::GraphProto& graph) {
    std::string listed;
    int shown = 0, total = 0;
    for (const auto& t : graph.initializer()) {
        if (t.data_type() != onnx::TensorProto::FLOAT) continue;
        if (shown < 4) listed += (shown++ == 0 ? "'" : ", '") + t.name() + "'";
        ++total;
    }
    if (total == 0) return "none";
    if (total > shown) listed += " and " + std::to_string(total - shown) + " more";
    return listed;
}

}  // namespace

Result<std::vector<std::string>> freeze_initializers(onnx::ModelProto& proto, const std::vector<std::string>& names) {
    if (names.empty()) return make_error(ErrorCode::kInvalidArgument, "no tensor named: give --tensors NAME[,NAME...]");
    for (const auto& meta : proto.metadata_props())
        if (meta.key() == kDescriptionKey)
            return make_error(ErrorCode::kInvalidArgument,
                              "the file was exported by psrun and carries its description (metadata psrun.model), "
                              "which decides the tensors that train: freeze them in the file the run was trained "
                              "from and train again");
    std::set<std::string> floats;
    for (const auto& t : proto.graph().initializer())
        if (t.data_type() == onnx::TensorProto::FLOAT) floats.insert(t.name());
    std::set<std::string> wanted;
    for (const auto& name : names) {
        if (!floats.contains(name))
            return make_error(ErrorCode::kInvalidArgument,
                              "'" + name + "' is not a float initializer of the graph (its float initializers: " +
                                  some_float_initializers(proto.graph()) + ")");
        wanted.insert(name);
    }
    onnx::StringStringEntryProto* entry = nullptr;
    for (auto& meta : *proto.mutable_metadata_props())
        if (meta.key() == kFrozenKey) entry = &meta;
    if (entry != nullptr) {
        const auto list = nlohmann::json::parse(entry->value(), nullptr, false);
        if (!list.is_array())
            return make_error(
                ErrorCode::kInvalidArgument,
                std::string("metadata ") + kFrozenKey + " is damaged: expected a JSON list of initializer names");
        for (const auto& n : list) {
            if (!n.is_string() || !floats.contains(n.get<std::string>()))
                return make_error(ErrorCode::kInvalidArgument, std::string("metadata ") + kFrozenKey + ": " + n.dump() +
                                                                   " is not a float initializer of the graph");
            wanted.insert(n.get<std::string>());
        }
    } else {
        entry = proto.add_metadata_props();
        entry->set_key(kFrozenKey);
    }
    std::vector<std::string> frozen;
    for (const auto& t : proto.graph().initializer())
        if (wanted.contains(t.name()) && t.data_type() == onnx::TensorProto::FLOAT) {
            frozen.push_back(t.name());
            wanted.erase(t.name());  // an initializer listed twice in the graph counts once
        }
    entry->set_value(nlohmann::json(frozen).dump());
    return frozen;
}

}  // namespace psrun::onnx_io
