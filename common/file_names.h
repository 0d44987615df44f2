// Names of the files a command writes beside one the user named (predict's one file per head,
// export's ids file per keyed table). Pure functions, no I/O.
#pragma once

#include <filesystem>
#include <string>

namespace psrun {

// `name` (a head's, a node's) as a part of a file name: A-Z a-z 0-9 _ - . kept, anything else '_'.
inline std::string file_name_part(const std::string& name) {
    std::string out;
    for (const char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                        c == '-' || c == '.';
        out += ok ? c : '_';
    }
    return out;
}

// The file beside `path` named "<path's stem>.<file_name_part(part)><extension>":
// ("out/probs.npy", "tags", ".npy") -> "out/probs.tags.npy".
inline std::string sibling_file(const std::string& path, const std::string& part, const std::string& extension) {
    const std::filesystem::path p(path);
    return (p.parent_path() / (p.stem().string() + "." + file_name_part(part) + extension)).string();
}

}  // namespace psrun
