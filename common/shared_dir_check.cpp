#include "common/shared_dir_check.h"

#include <sys/random.h>

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/model_dir_lock.h"
#include "common/text_file.h"

namespace psrun {
namespace {

namespace fs = std::filesystem;

const char* const kFix =
    "every psd and the chief must see one directory at the model dir's path, or checkpoint shards land on "
    "different disks: put --model-dir on a file system every node shares (not $TMPDIR or a node-local scratch "
    "disk)";

Result<void> write_text(const std::string& path, const std::string& text) {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out || ec) return make_error(ErrorCode::kIo, path + ": cannot write");
    return {};
}

std::string absolute(const std::string& dir) {
    std::error_code ec;
    auto p = fs::absolute(dir, ec);
    return ec ? dir : p.lexically_normal().string();
}

std::string check_dir(const std::string& model_dir) { return absolute(model_dir) + "/.psrun/dircheck"; }

Result<std::string> fresh_nonce() {
    unsigned char bytes[16];
    if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes))
        return make_error(ErrorCode::kIo, "getrandom failed");
    std::string hex;
    for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
    return hex;
}

}  // namespace

Result<void> verify_shared_model_dir(PsClient& client, const std::string& model_dir) {
    const std::string dir = absolute(model_dir);
    PSRUN_TRY_ASSIGN(auto nonce, fresh_nonce());
    const std::string chief_file = check_dir(dir) + "/chief." + nonce;
    PSRUN_TRY(write_text(chief_file, nonce));
    auto cleanup = [&] {
        std::error_code ec;
        fs::remove(chief_file, ec);
        for (std::uint32_t i = 0; i < client.layout().num_shards; ++i)
            fs::remove(check_dir(dir) + "/ps-" + std::to_string(i) + "." + nonce, ec);
    };
    if (auto ok = client.dir_check(dir, nonce); !ok) {
        cleanup();
        return tl::unexpected(ok.error());
    }
    for (std::uint32_t i = 0; i < client.layout().num_shards; ++i) {
        const std::string ps_file = check_dir(dir) + "/ps-" + std::to_string(i) + "." + nonce;
        if (read_text_file(ps_file) != nonce) {
            cleanup();
            return make_error(ErrorCode::kInvalidArgument,
                              "ps " + std::to_string(i) + " wrote its proof into what it sees as the model dir, but " +
                                  ps_file + " is not there on the chief's host " + this_host() + ": " + kFix);
        }
    }
    cleanup();
    spdlog::info("model dir {}: every psd ({}) sees the same directory", dir, client.layout().num_shards);
    return {};
}

Result<void> answer_dir_check(const std::string& own_view, const std::string& chief_dir, const std::string& nonce,
                              std::uint32_t ps_index) {
    const std::string view = own_view.empty() ? chief_dir : absolute(own_view);
    const std::string chief_file = check_dir(view) + "/chief." + nonce;
    const std::string who = "ps " + std::to_string(ps_index) + " on host " + this_host();
    const std::string seen = read_text_file(chief_file);
    if (seen != nonce) {
        std::error_code ec;
        const bool exists = fs::exists(view, ec);
        return make_error(ErrorCode::kInvalidArgument,
                          who + " does not see the chief's model dir " + chief_dir + ": " + chief_file + " is " +
                              (seen.empty() ? "not there" : "another run's") + " (this psd's model dir is " + view +
                              (exists ? "" : ", which does not exist here") + "): " + kFix);
    }
    const std::string mine = check_dir(view) + "/ps-" + std::to_string(ps_index) + "." + nonce;
    if (auto ok = write_text(mine, nonce); !ok)
        return make_error(ErrorCode::kInvalidArgument,
                          who + ": cannot write into the model dir " + view + " (" + ok.error().message + "): " + kFix);
    return {};
}

}  // namespace psrun
