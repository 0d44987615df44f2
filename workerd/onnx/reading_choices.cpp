#include "workerd/onnx/reading_choices.h"

#include <algorithm>

namespace psrun::onnx_io {

std::size_t ReadingChoices::pick(std::size_t count, int node) {
    if (at_ < choices_.size() && choices_[at_].count != count) choices_.resize(at_);  // another graph from here
    if (at_ == choices_.size()) choices_.push_back(Choice{0, count, node});
    choices_[at_].node = node;
    return choices_[at_++].pick;
}

std::size_t ReadingChoices::changed() const {
    return static_cast<std::size_t>(
        std::count_if(choices_.begin(), choices_.end(), [](const Choice& c) { return c.pick != 0; }));
}

}  // namespace psrun::onnx_io
