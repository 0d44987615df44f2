// freeze_initializers (onnx_freeze.h).
#include "workerd/onnx/onnx_freeze.h"

#include <map>
#include <set>
#include <string_view>

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

Result<std::set<std::string>> frozen_initializers(const onnx::ModelProto& proto) {
    std::set<std::string> frozen;
    for (const auto& meta : proto.metadata_props()) {
        if (meta.key() != kFrozenKey) continue;
        const std::string where = std::string("metadata ") + kFrozenKey;
        const auto list = nlohmann::json::parse(meta.value(), nullptr, false);
        if (!list.is_array())
            return make_error(ErrorCode::kInvalidArgument,
                              where + ": expected a JSON list of initializer names, e.g. [\"pe\"]");
        std::map<std::string_view, const onnx::TensorProto*> initializers;
        for (const auto& t : proto.graph().initializer()) initializers[t.name()] = &t;
        for (const auto& name : list) {
            const auto it = name.is_string() ? initializers.find(name.get<std::string>()) : initializers.end();
            if (it == initializers.end() || it->second->data_type() != onnx::TensorProto::FLOAT)
                return make_error(ErrorCode::kInvalidArgument,
                                  where + ": " + name.dump() + " is not a float initializer of the graph");
            frozen.insert(name.get<std::string>());
        }
    }
    return frozen;
}

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
    PSRUN_TRY_ASSIGN(auto listed, frozen_initializers(proto));
    wanted.insert(listed.begin(), listed.end());
    onnx::StringStringEntryProto* entry = nullptr;
    for (auto& meta : *proto.mutable_metadata_props())
        if (meta.key() == kFrozenKey) entry = &meta;
    if (entry == nullptr) {
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
