#include "common/utf8.h"

#include <nlohmann/json.hpp>

namespace psrun {

std::string valid_utf8(std::string_view text) {
    // nlohmann-json's serializer validates UTF-8 and, with `replace`, writes U+FFFD for a bad
    // byte; parsing the quoted result back gives the repaired string.
    const std::string quoted =
        nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return nlohmann::json::parse(quoted).get<std::string>();
}

std::string json_text(const nlohmann::json& j, int indent) {
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace psrun
