#include "launcher/join_file.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>

#include "common/checkpoint_store.h"
#include "common/text_file.h"

namespace psrun::launcher {

std::string join_file_path(const std::string& model_dir) { return model_dir + "/.psrun/join.json"; }

std::string encode_join_info(const JoinInfo& info) {
    const nlohmann::json j = {{"ps", info.ps},
                              {"key_file", info.key_file},
                              {"no_auth", info.no_auth},
                              {"auth", info.auth},
                              {"run_id", info.run_id},
                              {"num_workers", info.num_workers},
                              {"max_workers", info.max_workers}};
    return j.dump(2) + "\n";
}

Result<JoinInfo> decode_join_info(const std::string& text, const std::string& where) {
    const auto bad = [&](const std::string& why) {
        return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: not a valid join file ({})", where, why));
    };
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    JoinInfo info;
    try {
        info.ps = j.at("ps").get<std::string>();
        info.key_file = j.at("key_file").get<std::string>();
        info.no_auth = j.at("no_auth").get<bool>();
        info.auth = j.at("auth").get<std::string>();
        info.run_id = j.at("run_id").get<std::string>();
        info.num_workers = j.at("num_workers").get<int>();
        info.max_workers = j.at("max_workers").get<int>();
    } catch (const nlohmann::json::exception& e) {
        return bad(e.what());
    }
    if (info.ps.empty()) return bad("no psd endpoints");
    if (info.num_workers < 1 || info.max_workers <= info.num_workers || info.max_workers > 1000000)
        return bad(fmt::format("{} workers, --max-workers {}", info.num_workers, info.max_workers));
    if (!info.no_auth && info.key_file.empty()) return bad("no key file and not --no-auth");
    if (!info.auth.empty() && info.auth != "mac" && info.auth != "curve") return bad("auth '" + info.auth + "'");
    return info;
}

std::optional<JoinInfo> join_info_from_psd(const std::vector<std::string>& argv) {
    JoinInfo info;
    for (std::size_t i = 0; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        const bool has_value = i + 1 < argv.size();
        if (a == "--no-auth") info.no_auth = true;
        if (!has_value) continue;
        const std::string& v = argv[i + 1];
        if (a == "--ps") info.ps = v;
        else if (a == "--key-file") info.key_file = v;
        else if (a == "--auth") info.auth = v;
        else if (a == "--run-id") info.run_id = v;
        else if (a == "--num-workers") info.num_workers = std::atoi(v.c_str());
        else if (a == "--max-workers") info.max_workers = std::atoi(v.c_str());
    }
    if (info.ps.empty() || info.num_workers < 1 || info.max_workers <= info.num_workers) return std::nullopt;
    if (!info.key_file.empty() && !info.key_file.starts_with("/"))
        info.key_file = std::filesystem::absolute(info.key_file).string();
    return info;
}

Result<void> write_join_info(const std::string& model_dir, const JoinInfo& info) {
    std::error_code ec;
    std::filesystem::create_directories(model_dir + "/.psrun", ec);
    if (ec) return make_error(ErrorCode::kIo, fmt::format("cannot create {}/.psrun: {}", model_dir, ec.message()));
    return write_file_atomically(join_file_path(model_dir), encode_join_info(info));
}

Result<JoinInfo> read_join_info(const std::string& model_dir) {
    const std::string path = join_file_path(model_dir);
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        return make_error(ErrorCode::kNotFound,
                          fmt::format("{} does not exist: no job with room for workers that join runs on this model "
                                      "dir (start it with psrun local/run --max-workers M), or give --ps and "
                                      "--key-file",
                                      path));
    return decode_join_info(read_text_file(path), path);
}

}  // namespace psrun::launcher
