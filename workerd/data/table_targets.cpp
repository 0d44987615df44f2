#include "workerd/data/table_targets.h"

#include <algorithm>
#include <map>

#include "common/utf8.h"
#include "workerd/data/table_cells.h"

namespace psrun::worker {

Result<std::size_t> find_column(const std::vector<std::string>& header, const std::string& name,
                                const std::string& path) {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end())
        return invalid_argument(path + ": no column '" + name + "' (the header names " + quoted_list(header) + ")");
    return static_cast<std::size_t>(it - header.begin());
}

Result<TableTargets> TableTargets::find(const std::vector<std::string>& header, const std::vector<std::string>& names,
                                        const std::string& path, const ModelInput& model) {
    TableTargets t;
    t.path_ = path;
    t.header_ = header;
    t.kind_ = model.target;
    std::vector<std::string> targets = names;
    if (targets.empty()) {
        if (std::find(header.begin(), header.end(), "label") == header.end())
            return invalid_argument(
                path + ": give --targets COLUMN[,COLUMN...] (no column is named 'label'; the header names " +
                quoted_list(header) + ")");
        targets = {"label"};
    }
    for (const auto& name : targets) {
        PSRUN_TRY_ASSIGN(auto c, find_column(header, name, path));
        t.columns_.push_back(c);
    }
    if (model.target == TargetKind::kClass && t.columns_.size() != 1)
        return invalid_argument(path + ": --targets names " + std::to_string(t.columns_.size()) +
                                " columns but the model " + model.name +
                                " predicts one class (give one target column)");
    return t;
}

TableTargets TableTargets::absent(const std::string& path, const ModelInput& model) {
    TableTargets t;
    t.path_ = path;
    t.kind_ = model.target;
    t.absent_ = true;
    t.absent_width_ = static_cast<std::size_t>(std::max<std::int64_t>(model.target_length, 0));
    return t;
}

std::vector<std::string> TableTargets::names() const {
    std::vector<std::string> v;
    for (auto c : columns_) v.push_back(header_[c]);
    return v;
}

Result<void> TableTargets::add(const std::vector<std::string>& f, std::size_t line) {
    if (absent_) {
        ++rows_;
        return {};
    }
    for (std::size_t c : columns_) {
        if (kind_ == TargetKind::kVector) {
            float v = 0;
            if (!parse_float_cell(f[c], v))
                return invalid_argument(path_ + ": line " + std::to_string(line) + ", column '" + header_[c] + "': '" +
                                        f[c] + "' is not a number");
            values_.push_back(v);
            continue;
        }
        std::int64_t v = 0;
        if (class_ints_ && !parse_int_cell(f[c], v)) class_ints_ = false;
        ints_.push_back(v);
        names_.push_back(std::string(trim_cell(f[c])));
    }
    return {};
}

Result<void> TableTargets::finish(LabeledImages& d) const {
    d.target = kind_;
    if (absent_) {
        d.target_length = kind_ == TargetKind::kVector ? absent_width_ : 0;
        if (kind_ == TargetKind::kVector) d.targets.assign(rows_ * absent_width_, 0.0f);
        else d.labels.assign(rows_, 0);
        return {};
    }
    d.target_length = kind_ == TargetKind::kVector ? columns_.size() : 0;
    if (kind_ == TargetKind::kVector) {
        d.targets = values_;
        return {};
    }
    if (class_ints_) {
        for (const auto v : ints_)
            if (v < INT32_MIN || v > INT32_MAX)
                return invalid_argument(path_ + ": label " + std::to_string(v) + " does not fit int32");
        d.labels.assign(ints_.begin(), ints_.end());
        return {};
    }
    std::map<std::string, std::int32_t> index;
    for (const auto& n : names_) index.emplace(n, 0);
    for (auto& [name, id] : index) {
        id = static_cast<std::int32_t>(d.class_names.size());
        d.class_names.push_back(valid_utf8(name));
    }
    for (const auto& n : names_) d.labels.push_back(index[n]);
    return {};
}

}  // namespace psrun::worker
