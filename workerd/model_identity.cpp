#include "workerd/model_identity.h"

#include "workerd/nn/model_summary.h"

namespace psrun::worker {

wire::ModelId model_id(const nn::ModelDescription& model) {
    return {model.name.substr(0, wire::kMaxModelNameBytes), nn::architecture_hash(model)};
}

nlohmann::json model_record(const nn::ModelDescription& model) {
    return {{"name", model.name}, {"hash", nn::architecture_hash(model)}, {"description", nn::model_json(model)}};
}

Result<nn::ModelDescription> model_from_record(const nlohmann::json& record, const std::string& where,
                                               const nn::ModelDescription& fallback) {
    const std::string name = record.is_object() ? record.value("name", "") : "";
    if (!record.is_object() || !record.contains("description")) {
        if (name == fallback.name) return fallback;
        return make_error(ErrorCode::kInvalidArgument,
                          where + " records model '" + name + "' without its description; this run has " +
                              describe_model(fallback) + ": give the --model it was trained with");
    }
    auto parsed = nn::parse_model(record["description"], where + " model");
    if (!parsed) return tl::unexpected(parsed.error());
    const std::string hash = record.value("hash", "");
    if (!hash.empty() && nn::architecture_hash(*parsed) != hash)
        return make_error(ErrorCode::kInvalidArgument,
                          where + ": the recorded description of model '" + name +
                              "' does not match its recorded architecture hash (edited by hand?)");
    return parsed;
}

std::string describe_model(const nn::ModelDescription& model) {
    return "'" + model.name + "' (architecture " + nn::architecture_hash(model).substr(0, 12) + ")";
}

}  // namespace psrun::worker
