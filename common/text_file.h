// Reading a small text file whole (a marker, a /proc entry): "" when it cannot be read, for
// callers that treat a missing file like an empty one.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace psrun {

inline std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace psrun
