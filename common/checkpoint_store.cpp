#include "common/checkpoint_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "common/row_delta.h"
#include "common/tensor_file.h"
#include "common/tensor_file_stream.h"
#include "common/utf8.h"

namespace psrun {
namespace fs = std::filesystem;
namespace {

constexpr const char* kManifest = "manifest.json";

Result<void> sync_path(const std::string& path, int flags) {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    if (fd < 0) return make_error(ErrorCode::kIo, path + ": open for fsync: " + std::strerror(errno));
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) return make_error(ErrorCode::kIo, path + ": fsync: " + std::strerror(err));
    return {};
}

Result<void> write_state_file(const std::string& model_dir, const std::vector<CheckpointInfo>& all) {
    nlohmann::json state;
    state["latest"] = all.empty() ? "" : fs::path(all.back().dir).filename().string();
    state["all"] = nlohmann::json::array();
    for (const auto& c : all) state["all"].push_back(fs::path(c.dir).filename().string());
    return write_file_atomically(model_dir + "/checkpoint", json_text(state, 2) + "\n");
}

}  // namespace

std::string checkpoint_dir_name(std::int64_t step) {
    char name[32];
    std::snprintf(name, sizeof name, "ckpt-%010lld", static_cast<long long>(step));
    return name;
}

Result<void> write_file_atomically(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return make_error(ErrorCode::kIo, tmp + ": cannot create: " + std::strerror(errno));
    std::size_t done = 0;
    int err = 0;
    while (done < text.size() && err == 0) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n > 0) done += static_cast<std::size_t>(n);
        else if (errno != EINTR) err = errno;
    }
    if (err == 0 && ::fsync(fd) != 0) err = errno;
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
    if (err != 0) {
        ::unlink(tmp.c_str());
        return make_error(ErrorCode::kIo, path + ": cannot write: " + std::strerror(err));
    }
    const fs::path dir = fs::path(path).parent_path();  // "" for a bare file name: the working directory
    return sync_path(dir.empty() ? std::string(".") : dir.string(), O_RDONLY | O_DIRECTORY);
}

PendingCheckpoint::PendingCheckpoint(std::string model_dir, std::string tmp_dir, std::int64_t step, int keep)
    : model_dir_(std::move(model_dir)), tmp_dir_(std::move(tmp_dir)), step_(step), keep_(keep) {}

PendingCheckpoint::PendingCheckpoint(PendingCheckpoint&& other) noexcept
    : model_dir_(std::move(other.model_dir_)),
      tmp_dir_(std::move(other.tmp_dir_)),
      step_(other.step_),
      keep_(other.keep_),
      done_(std::exchange(other.done_, true)) {}

PendingCheckpoint::~PendingCheckpoint() {
    if (done_) return;
    std::error_code ec;
    fs::remove_all(tmp_dir_, ec);
}

Result<CheckpointInfo> PendingCheckpoint::commit(nlohmann::json manifest) {
    std::error_code ec;
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(tmp_dir_, ec))
        if (entry.is_regular_file() && entry.path().filename() != kManifest)
            files.push_back(entry.path().filename().string());
    if (ec) return make_error(ErrorCode::kIo, tmp_dir_ + ": " + ec.message());
    std::sort(files.begin(), files.end());
    manifest["step"] = step_;
    manifest["files"] = files;
    for (const auto& f : files) PSRUN_TRY(sync_path(tmp_dir_ + "/" + f, O_RDONLY));
    PSRUN_TRY(write_file_atomically(tmp_dir_ + "/" + kManifest, json_text(manifest, 2) + "\n"));

    const std::string final_dir = model_dir_ + "/" + checkpoint_dir_name(step_);
    fs::remove_all(final_dir, ec);  // a re-save of the same step replaces the older one
    if (::rename(tmp_dir_.c_str(), final_dir.c_str()) != 0)
        return make_error(ErrorCode::kIo, final_dir + ": rename failed: " + std::strerror(errno));
    done_ = true;
    PSRUN_TRY(sync_path(model_dir_, O_RDONLY | O_DIRECTORY));

    // The newest keep_, and the full checkpoints their differential pieces build on
    // (common/row_delta.h); where a checkpoint's bases cannot be read, nothing older goes.
    CheckpointStore store(model_dir_, keep_);
    auto all = store.list();
    std::set<std::int64_t> needed;
    bool keep_all = false;  // a kept checkpoint's bases are unknown
    for (std::size_t i = all.size() > static_cast<std::size_t>(keep_) ? all.size() - keep_ : 0; i < all.size(); ++i) {
        needed.insert(all[i].step);
        auto bases = row_delta_bases(all[i].dir);
        keep_all = keep_all || !bases;
        if (bases)
            for (const auto b : *bases) needed.insert(static_cast<std::int64_t>(b));
    }
    std::vector<CheckpointInfo> kept;
    for (const auto& c : all) {
        if (keep_all || needed.contains(c.step)) kept.push_back(c);
        else fs::remove_all(c.dir, ec);
    }
    PSRUN_TRY(write_state_file(model_dir_, kept));
    return CheckpointInfo{step_, final_dir};
}

CheckpointStore::CheckpointStore(std::string model_dir, int keep)
    : model_dir_(std::move(model_dir)), keep_(std::max(1, keep)) {}

Result<PendingCheckpoint> CheckpointStore::begin(std::int64_t step) const {
    std::error_code ec;
    fs::create_directories(model_dir_, ec);
    if (ec) return make_error(ErrorCode::kIo, model_dir_ + ": cannot create: " + ec.message());
    const std::string tmp = model_dir_ + "/." + checkpoint_dir_name(step) + ".tmp." + std::to_string(::getpid());
    fs::remove_all(tmp, ec);
    if (!fs::create_directory(tmp, ec) || ec)
        return make_error(ErrorCode::kIo, tmp + ": cannot create: " + ec.message());
    return PendingCheckpoint(model_dir_, tmp, step, keep_);
}

std::vector<CheckpointInfo> CheckpointStore::list() const {
    std::vector<CheckpointInfo> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(model_dir_, ec)) {
        const std::string name = entry.path().filename().string();
        if (!entry.is_directory() || name.rfind("ckpt-", 0) != 0 || name.size() != 15) continue;
        if (!fs::exists(entry.path() / kManifest)) continue;
        try {
            out.push_back({std::stoll(name.substr(5)), entry.path().string()});
        } catch (const std::exception&) {
            continue;  // not one of ours
        }
    }
    std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.step < b.step; });
    return out;
}

Result<nlohmann::json> CheckpointStore::read_manifest(const CheckpointInfo& info) {
    const std::string path = info.dir + "/" + kManifest;
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(ErrorCode::kNotFound, path + ": missing");
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    return parse_manifest(text, path);
}

Result<nlohmann::json> CheckpointStore::parse_manifest(std::string_view text, const std::string& path) {
    auto manifest = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (manifest.is_discarded() || !manifest.is_object())
        return make_error(ErrorCode::kInvalidArgument, path + ": not a valid manifest (not a JSON object)");
    const auto files = manifest.find("files");
    if (files == manifest.end() || !files->is_array())
        return make_error(ErrorCode::kInvalidArgument, path + ": not a valid manifest (no \"files\" array)");
    for (const auto& f : *files) {
        const std::string* name = f.get_ptr<const std::string*>();
        if (name == nullptr || name->empty() || *name == "." || *name == ".." ||
            name->find_first_of(std::string_view("/\0", 2)) != std::string::npos)
            return make_error(ErrorCode::kInvalidArgument,
                              path + ": not a valid manifest (\"files\" must list plain file names)");
    }
    return manifest;
}

Result<CheckpointInfo> CheckpointStore::latest_valid(std::vector<std::string>* warnings) const {
    // "" when every file the manifest of `info` lists verifies.
    auto problem_of = [](const CheckpointInfo& info) -> std::string {
        auto manifest = read_manifest(info);
        if (!manifest) return manifest.error().message;
        for (const auto& f : (*manifest)["files"]) {
            const std::string name = f.get<std::string>();  // parse_manifest checked it
            // Streamed: a file holding a psd's part of a sparse table is checked in constant memory.
            auto file = TensorFileReader::open(info.dir + "/" + name);
            if (!file) return file.error().message;
        }
        return "";
    };
    auto all = list();
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
        std::string problem = problem_of(*it);
        if (problem.empty()) {  // and the full checkpoints its differential pieces build on
            auto bases = row_delta_bases(it->dir);
            if (!bases) problem = bases.error().message;
            for (std::size_t b = 0; bases && b < bases->size() && problem.empty(); ++b) {
                const CheckpointInfo base{static_cast<std::int64_t>((*bases)[b]),
                                          row_delta_base_dir(it->dir, (*bases)[b])};
                problem = problem_of(base);
                if (!problem.empty()) problem = it->dir + " builds on " + base.dir + ": " + problem;
            }
        }
        if (problem.empty()) return *it;
        if (warnings) warnings->push_back("skipping damaged checkpoint: " + problem);
    }
    return make_error(ErrorCode::kNotFound, "no valid checkpoint in " + model_dir_);
}

}  // namespace psrun
