// Image folders as torchvision's ImageFolder and Keras' image_dataset_from_directory keep them:
// one subfolder per class under a root, classes numbered by their folder names sorted bytewise
// (torchvision's rule), the images of a class anywhere below its folder (subfolders and
// symbolic links followed), files with the extensions .jpg .jpeg .png .pgm (any case) taken, any
// other file skipped. Listing only: decoding is workerd/data/image_decoder.h's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

struct ImageFolder {
    std::string root;
    std::vector<std::string> classes;  // sorted folder names; label i is classes[i]
    std::vector<std::string> files;    // paths: class by class, sorted within a class
    std::vector<std::int32_t> labels;  // per file
    std::size_t skipped_files = 0;     // files without an image extension
};

// Lists `dir`. Errors (kInvalidArgument naming the folder): not a directory, no class
// subfolders, a class folder without images (which images count is said), more than 2^31
// files.
[[nodiscard]] Result<ImageFolder> scan_image_folder(const std::string& dir);

// Splits `all` into training and validation files by a hash of each file's path relative to the
// root (FNV-1a, 64 bits): a file is validation when hash mod 10^6 < fraction * 10^6. The split
// does not depend on the seed or on other files, so adding images never moves existing ones
// between the two (as TensorFlow's image retraining example did). REQUIRES 0 < fraction < 1.
// Errors: either part empty (naming the root and the fraction).
[[nodiscard]] Result<void> split_validation(const ImageFolder& all, double fraction, ImageFolder& train,
                                            ImageFolder& validation);

// Checks that `test` has the classes of `train` (same names, same order). Error names both.
[[nodiscard]] Result<void> check_same_classes(const ImageFolder& train, const ImageFolder& test);

}  // namespace psrun::worker
