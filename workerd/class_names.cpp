#include "workerd/class_names.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/checkpoint_store.h"
#include "common/utf8.h"

namespace psrun::worker {

Result<void> write_data_record(const std::string& model_dir, const DataRecord& record) {
    std::error_code ec;
    std::filesystem::create_directories(model_dir, ec);
    if (ec) return make_error(ErrorCode::kIo, model_dir + ": cannot create it: " + ec.message());
    const std::string path = std::filesystem::absolute(model_dir).string() + "/classes.json";
    const nlohmann::json j{{"classes", record.classes}, {"image_resize", record.image_resize}};
    return write_file_atomically(path, json_text(j, 1) + "\n");
}

Result<DataRecord> read_data_record(const std::string& model_dir) {
    const std::string path = model_dir + "/classes.json";
    std::ifstream in(path);
    if (!in) return DataRecord{};
    std::stringstream text;
    text << in.rdbuf();
    const auto j = nlohmann::json::parse(text.str(), nullptr, false);
    const auto bad = [&] {
        return make_error(ErrorCode::kInvalidArgument,
                          path + ": not {\"classes\": [names], \"image_resize\": \"crop|pad|stretch|\"}");
    };
    if (j.is_discarded() || !j.is_object() || !j.contains("classes") || !j["classes"].is_array()) return bad();
    DataRecord r;
    for (const auto& n : j["classes"]) {
        if (!n.is_string()) return bad();
        r.classes.push_back(n.get<std::string>());
    }
    if (j.contains("image_resize")) {
        if (!j["image_resize"].is_string()) return bad();
        r.image_resize = j["image_resize"].get<std::string>();
    }
    return r;
}

}  // namespace psrun::worker
