#include "launcher/env_map.h"

#include <cstring>

namespace psrun::launcher {

EnvMap env_from_environ(char** environ_ptr) {
    EnvMap env;
    for (char** p = environ_ptr; p != nullptr && *p != nullptr; ++p) {
        const char* eq = std::strchr(*p, '=');
        if (eq == nullptr) continue;
        env.emplace(std::string(*p, static_cast<size_t>(eq - *p)), std::string(eq + 1));
    }
    return env;
}

std::optional<std::string> env_get(const EnvMap& env, const std::string& name) {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
}

}  // namespace psrun::launcher
