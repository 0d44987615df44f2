// Which reading of a file's fixed batch of 1 each ambiguous node takes, walk after walk of the
// ONNX importer (onnx_import.cpp, onnx_importer.h).
#pragma once

#include <cstddef>
#include <vector>

namespace psrun::onnx_io {

// The readings a walk took where a file of fixed batch 1 allows several (a Reshape's target, an
// Expand's shape, a fill: nn/ops/fixed_batch.h), in the walk's order, each with its node.
// import_onnx walks a graph again after a failed walk with next(): of the choices that the
// failure may depend on, the last that has another reading moves on (the choices after it start
// again from their first), the most recent being the most likely wrong. Each next() moves to a
// later combination, so the walks end. Not thread-safe; outlives the Importers that use it.
class ReadingChoices {
  public:
    // Of `count` >= 1 readings at node `node`, the walk's next ambiguous one, the one to take.
    std::size_t pick(std::size_t count, int node);
    // The next combination after a failed walk (the choices it made), moving only a choice whose
    // node `matters` (node index -> bool); false when none is left.
    template <typename Matters>
    bool next(Matters matters);
    // Before a walk of a rewritten graph (an If inlined): replay from the first choice.
    void rewind() { at_ = 0; }
    // Choices of the last walk that took another reading than the first.
    std::size_t changed() const;

  private:
    struct Choice {
        std::size_t pick = 0, count = 1;
        int node = -1;
    };
    std::vector<Choice> choices_;
    std::size_t at_ = 0;
};

template <typename Matters>
bool ReadingChoices::next(Matters matters) {
    choices_.resize(at_);  // choices after the failure were not reached
    at_ = 0;
    for (std::size_t k = choices_.size(); k-- > 0;) {
        if (choices_[k].pick + 1 >= choices_[k].count || !matters(choices_[k].node)) continue;
        ++choices_[k].pick;
        choices_.resize(k + 1);
        return true;
    }
    return false;
}

}  // namespace psrun::onnx_io
