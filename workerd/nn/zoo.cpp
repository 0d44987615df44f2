#include "workerd/nn/zoo.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "workerd/nn/field_reader.h"

namespace psrun::nn {

Result<ModelDescription> load_model(std::string_view spec) {
    const bool is_path =
        spec.find('/') != std::string_view::npos || (spec.size() > 5 && spec.substr(spec.size() - 5) == ".json");
    if (!is_path) {
        std::vector<std::string_view> names;
        for (const auto& m : builtin_models()) {
            if (m.name == spec) return parse_model_text(m.json, spec);
            names.push_back(m.name);
        }
        return make_error(ErrorCode::kNotFound, "no built-in model \"" + std::string(spec) + "\" (did you mean \"" +
                                                    closest_name(spec, names) + "\"? built-ins: " + join_names(names) +
                                                    "; a file path needs a '/' or \".json\")");
    }
    const std::string path(spec);
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(ErrorCode::kIo, "model " + path + ": cannot open: " + std::strerror(errno));
    std::string text;
    text.resize(kMaxModelTextBytes + 1);
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (in.bad()) return make_error(ErrorCode::kIo, "model " + path + ": read failed");
    text.resize(static_cast<std::size_t>(in.gcount()));
    return parse_model_text(text, path);
}

}  // namespace psrun::nn
