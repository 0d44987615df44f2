// libFuzzer target for recommender tables (workerd/data/column_spec.h, column_table.h): the
// input's first line is a spec, words separated by spaces: "w:W=BAG[:sum|mean]" a --bag-weights
// argument, "s:C" a --value-separator, "n:A,B,..." --column-names, "d:C" a --delimiter, any
// other word an --input-columns argument; the rest is the CSV table, read for a click model (dense [2] float, cat [2]
// ids of 50 rows, tags [3] ids of 20 rows, tags_w [3] float; targets: "label", one float). A spec that does not parse
// is replaced by the model's own (dense=I1,I2 cat=C1,C2 tags=T w:tags_w=tags s:|) over the whole input. Contract
// checked: never a crash; an accepted table has rows, every input rows x width values, ids within their table, every
// float finite, sum and mean weights in [0, 1] summing to at most the slots (weighted bags: the cells' own finite
// weights). Built and run by test/fuzz/fuzz.sh columns.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "test/fuzz/click_table_inputs.h"
#include "workerd/data/column_table.h"

namespace {

using namespace psrun::worker;

psrun::Result<ColumnSpec> spec_from(std::string_view line) {
    std::vector<std::string> columns, weights;
    std::string separator, names, delimiter;
    std::size_t start = 0;
    while (start <= line.size()) {
        const std::size_t end = std::min(line.find(' ', start), line.size());
        const std::string word(line.substr(start, end - start));
        if (word.starts_with("w:")) weights.push_back(word.substr(2));
        else if (word.starts_with("s:")) separator = word.substr(2);
        else if (word.starts_with("n:")) names = word.substr(2);
        else if (word.starts_with("d:")) delimiter = word.substr(2);
        else if (!word.empty()) columns.push_back(word);
        start = end + 1;
    }
    auto spec = parse_column_spec(columns, weights, separator);
    if (!spec) return spec;
    PSRUN_TRY(parse_table_layout(names, delimiter, *spec));
    return spec;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view all(reinterpret_cast<const char*>(data), size);
    const std::vector<TableInput> inputs = click_table_inputs();
    const ModelInput model = click_table_model();
    const std::size_t eol = all.find('\n');
    auto spec = spec_from(all.substr(0, eol));
    std::string_view table = eol == std::string_view::npos ? std::string_view() : all.substr(eol + 1);
    if (!spec) {
        spec = parse_column_spec({"dense=I1,I2", "cat=C1,C2", "tags=T"}, {"tags_w=tags"}, "|");
        table = all;
    }
    if (!spec) __builtin_trap();
    const std::vector<std::uint8_t> bytes(table.begin(), table.end());
    auto t = parse_column_table(bytes, "fuzz.csv", *spec, inputs, {}, model);
    if (!t) return 0;
    const LabeledImages& d = t->data;
    const bool weighted = std::any_of(spec->weights.begin(), spec->weights.end(),
                                      [](const BagWeights& w) { return w.combiner == BagCombiner::kWeighted; });
    const std::size_t n = d.size();
    if (n == 0 || d.images.f32.size() != n * 2 || d.targets.size() != n || d.columns.size() != 3) __builtin_trap();
    for (float v : d.images.f32)
        if (!std::isfinite(v)) __builtin_trap();
    for (std::size_t k = 0; k < 3; ++k) {
        const InputColumn& c = d.columns[k];
        const TableInput& in = inputs[k + 1];
        if ((in.ints ? c.i32.size() : c.f32.size()) != n * in.width) __builtin_trap();
        for (auto id : c.i32)
            if (id < 0 || id >= in.rows) __builtin_trap();
        for (float w : c.f32)
            if (!std::isfinite(w) || (!weighted && (w < 0 || w > 1))) __builtin_trap();
    }
    for (std::size_t e = 0; !weighted && e < n; ++e) {  // weights of a bag: 1s then 0s (sum) or n values of 1/n (mean)
        float sum = 0;
        for (std::size_t s = 0; s < 3; ++s) sum += d.columns[2].f32[e * 3 + s];
        if (sum > 3.0001f) __builtin_trap();
    }
    return 0;
}
