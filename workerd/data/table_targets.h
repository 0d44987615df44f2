// The target columns of a CSV table (workerd/data/table_reader.h, column_table.h), read row by
// row: a class model's one column of integer labels (used as they are) or of class names
// (numbered in sorted order, kept as class names); a vector model's float columns. Not
// thread-safe; one per table being read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/labeled_images.h"

namespace psrun::worker {

class TableTargets {
  public:
    // Finds the columns `names` (empty: the column "label") in `header`. Errors (kInvalidArgument,
    // starting with `path`): a name the header lacks (listing the header), no "label" column
    // when none is named, a class model given other than one column.
    [[nodiscard]] static Result<TableTargets> find(const std::vector<std::string>& header,
                                                   const std::vector<std::string>& names, const std::string& path,
                                                   const ModelInput& model);

    // No target columns (psrun predict on new rows): every row's targets read as 0 (class 0, or
    // model.target_length zeros).
    [[nodiscard]] static TableTargets absent(const std::string& path, const ModelInput& model);
    bool is_absent() const { return absent_; }

    // Header indices of the target columns, in the order named.
    const std::vector<std::size_t>& columns() const { return columns_; }
    // The target columns' names, for messages.
    std::vector<std::string> names() const;

    // Reads the targets of one row (`fields`, a full row; `line` for messages): a vector
    // model's cells must be finite numbers.
    [[nodiscard]] Result<void> add(const std::vector<std::string>& fields, std::size_t line);

    // Sets `d`'s target kind, width and labels (and class names) or target values. Errors: an
    // integer label beyond int32.
    [[nodiscard]] Result<void> finish(LabeledImages& d) const;

  private:
    std::string path_;
    std::vector<std::string> header_;
    std::vector<std::size_t> columns_;
    TargetKind kind_ = TargetKind::kClass;
    std::vector<std::string> names_;  // class targets as written
    std::vector<std::int64_t> ints_;  // class targets as integers while they all are
    bool class_ints_ = true;
    std::vector<float> values_;     // vector targets
    bool absent_ = false;           // absent(): no columns, zeros
    std::size_t absent_width_ = 0;  // absent() of a vector model: its target_length
    std::size_t rows_ = 0;          // absent(): the rows added
};

// Finds `name` in `header`: its index, or an error naming `path` and listing the header.
[[nodiscard]] Result<std::size_t> find_column(const std::vector<std::string>& header, const std::string& name,
                                              const std::string& path);

}  // namespace psrun::worker
