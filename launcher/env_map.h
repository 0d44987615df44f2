// The process environment as a value, so that parsers take it as an argument and tests can
// inject any environment (leveldb's Env idea). Only main() reads the real environ.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace psrun::launcher {

using EnvMap = std::map<std::string, std::string>;

// Copies `environ` (NAME=VALUE strings, null-terminated array).
EnvMap env_from_environ(char** environ_ptr);

// The value of `name`, or nullopt when unset. An empty value counts as set.
std::optional<std::string> env_get(const EnvMap& env, const std::string& name);

}  // namespace psrun::launcher
