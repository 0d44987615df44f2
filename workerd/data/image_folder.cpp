#include "workerd/data/image_folder.h"

#include <algorithm>
#include <filesystem>

#include "common/fnv1a.h"

namespace psrun::worker {
namespace {

namespace fs = std::filesystem;

bool has_image_extension(const fs::path& p) {
    std::string ext = p.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".pgm";
}

}  // namespace

Result<ImageFolder> scan_image_folder(const std::string& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        return invalid_argument(dir + ": not a directory (an image folder holds one subfolder of images per class)");
    ImageFolder out;
    out.root = dir;
    for (const auto& entry : fs::directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec))
        if (entry.is_directory(ec)) out.classes.push_back(entry.path().filename().string());
    if (ec) return invalid_argument(dir + ": cannot list it (" + ec.message() + ")");
    if (out.classes.empty())
        return invalid_argument(dir +
                                ": no class subfolders (an image folder holds one subfolder of images per class, "
                                "e.g. " +
                                dir + "/cat/1.jpg, " + dir + "/dog/2.png)");
    std::sort(out.classes.begin(), out.classes.end());
    for (std::size_t c = 0; c < out.classes.size(); ++c) {
        const fs::path class_dir = fs::path(dir) / out.classes[c];
        std::vector<std::string> files;
        const auto options =
            fs::directory_options::follow_directory_symlink | fs::directory_options::skip_permission_denied;
        for (auto it = fs::recursive_directory_iterator(class_dir, options, ec);
             !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
            if (!it->is_regular_file(ec)) continue;
            if (has_image_extension(it->path())) files.push_back(it->path().string());
            else ++out.skipped_files;
        }
        if (ec) return invalid_argument(class_dir.string() + ": cannot list it (" + ec.message() + ")");
        if (files.empty())
            return invalid_argument(class_dir.string() +
                                    ": class folder without images (.jpg, .jpeg, .png or .pgm files)");
        std::sort(files.begin(), files.end());
        if (out.files.size() + files.size() > 0x7fffffffu) return invalid_argument(dir + ": more than 2^31 images");
        out.files.insert(out.files.end(), files.begin(), files.end());
        out.labels.insert(out.labels.end(), files.size(), static_cast<std::int32_t>(c));
    }
    return out;
}

Result<void> split_validation(const ImageFolder& all, double fraction, ImageFolder& train, ImageFolder& validation) {
    train = ImageFolder{all.root, all.classes, {}, {}, all.skipped_files};
    validation = ImageFolder{all.root, all.classes, {}, {}, 0};
    const auto threshold = static_cast<std::uint64_t>(fraction * 1e6);
    for (std::size_t i = 0; i < all.files.size(); ++i) {
        const std::string relative = fs::path(all.files[i]).lexically_relative(all.root).generic_string();
        ImageFolder& to = fnv1a_64(relative) % 1000000 < threshold ? validation : train;
        to.files.push_back(all.files[i]);
        to.labels.push_back(all.labels[i]);
    }
    if (train.files.empty() || validation.files.empty())
        return invalid_argument(all.root + ": --validation-split " + std::to_string(fraction) + " of " +
                                std::to_string(all.files.size()) + " images leaves the " +
                                (train.files.empty() ? "training" : "validation") + " part empty");
    return {};
}

Result<void> check_same_classes(const ImageFolder& train, const ImageFolder& test) {
    if (train.classes == test.classes) return {};
    auto list = [](const std::vector<std::string>& v) {
        std::string s;
        for (std::size_t i = 0; i < v.size() && i < 12; ++i) s += (i ? ", " : "") + v[i];
        if (v.size() > 12) s += ", ... (" + std::to_string(v.size()) + " in all)";
        return s;
    };
    return invalid_argument(test.root + ": its classes (" + list(test.classes) +
                            ") are not those of the training folder " + train.root + " (" + list(train.classes) +
                            "): both need the same class subfolders");
}

}  // namespace psrun::worker
