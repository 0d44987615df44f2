// ONNX Einsum -> the layers plan_einsum (einsum.h) lowers it to, named "<node>/<step>" (the
// last one: the node's own name). matmul.cpp's schema lists Einsum and hands it here. Every
// refusal names the node, op Einsum and the equation.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/ops/einsum.h"

namespace psrun::nn {

namespace {

// Emits `plan`'s layers on `operands` (psrun values), named "<base>/<step>", the last one
// `last_name`; returns the value that is its result.
Result<std::string> emit_plan(OnnxNodeImport& node, const EinsumPlan& plan, std::vector<std::string> values,
                              const std::string& base, const std::string& last_name, const std::string& what) {
    for (std::size_t k = 0; k < plan.steps.size(); ++k) {
        const EinsumStep& s = plan.steps[k];
        nlohmann::json layer = s.attrs;
        layer["kind"] = s.kind;
        layer["name"] = k + 1 == plan.steps.size() ? last_name : base + "/" + s.label;
        nlohmann::json inputs = nlohmann::json::array();
        for (const auto i : s.inputs) inputs.push_back(values.at(i));
        layer["inputs"] = inputs;
        auto name = node.emit(std::move(layer));
        if (!name) {
            Error e = name.error();
            e.message += " (lowering " + what + ")";
            return tl::unexpected(e);
        }
        values.push_back(*name);
    }
    return values.at(plan.result);
}

// The terms of `equation` (spaces removed): operands, and the output after "->" (nullopt when
// implicit).
struct Terms {
    std::vector<std::string> inputs;
    std::optional<std::string> output;
};

Terms split_terms(const std::string& equation) {
    std::string text;
    for (const char c : equation)
        if (c != ' ') text += c;
    Terms t;
    const auto arrow = text.find("->");
    if (arrow != std::string::npos) t.output = text.substr(arrow + 2);
    std::string lhs = text.substr(0, arrow);
    std::size_t start = 0;
    for (std::size_t comma; (comma = lhs.find(',', start)) != std::string::npos; start = comma + 1)
        t.inputs.push_back(lhs.substr(start, comma - start));
    t.inputs.push_back(lhs.substr(start));
    auto dotted = [](const std::string& term) {  // "..." as one '.', as parse_einsum reads it
        std::string out;
        for (std::size_t i = 0; i < term.size();) {
            const bool ellipsis = term.compare(i, 3, "...") == 0;
            out.push_back(ellipsis ? '.' : term[i]);
            i += ellipsis ? 3 : 1;
        }
        return out;
    };
    for (auto& term : t.inputs) term = dotted(term);
    if (t.output) t.output = dotted(*t.output);
    return t;
}

// A letter repeated within one operand is a diagonal: torch.einsum("bii->bi"), the trace
// "ii->". Each such pair of axes becomes one: the two moved last (transpose), merged (reshape)
// and their diagonal gathered (indices 0, n + 1, 2(n + 1), ...), so the term names the letter
// once and the rest of the equation plans as before. Returns the operand's value and dims after.
Result<std::pair<std::string, Dims>> take_diagonals(OnnxNodeImport& node, std::string& term, std::string value,
                                                    Dims dims, const std::string& base, const std::string& what) {
    // The term must name the operand's axes: one letter each, or at most one ellipsis for the rest.
    const auto dot_count = static_cast<std::size_t>(std::count(term.begin(), term.end(), '.'));
    const std::size_t letters = term.size() - dot_count;
    if (dot_count > 1 || (dot_count == 0 ? letters != dims.size() : letters > dims.size()))
        return tl::unexpected(node.refuse(what + ": the operand term names " + std::to_string(letters) + " axes" +
                                          (dot_count ? " and an ellipsis" : "") + " for an operand of rank " +
                                          std::to_string(dims.size()) +
                                          " (write one letter per axis, or '...' once for the rest)"));
    for (int pass = 0;; ++pass) {
        // Axis of each letter: the ellipsis ('.') spans rank - (letters) axes.
        const std::size_t dots = dims.size() + 1 - term.size();
        std::vector<std::size_t> axis_of(term.size());
        for (std::size_t i = 0, a = 0; i < term.size(); ++i) {
            axis_of[i] = a;
            a += term[i] == '.' ? dots : 1;
        }
        std::size_t p = term.size(), q = term.size();
        for (std::size_t i = 0; i < term.size() && p == term.size(); ++i)
            for (std::size_t j = i + 1; j < term.size(); ++j)
                if (term[i] != '.' && term[i] == term[j]) {
                    p = i;
                    q = j;
                    break;
                }
        if (p == term.size()) return std::pair{value, dims};
        const std::size_t ap = axis_of[p], aq = axis_of[q];
        const Dim n = dims[ap];
        if (n.batch || dims[aq] != n)
            return tl::unexpected(node.refuse(what + ": '" + std::string(1, term[p]) +
                                              "' is repeated within an operand over axes of sizes " + n.to_string() +
                                              " and " + dims[aq].to_string() +
                                              " (a diagonal needs two equal axes, neither the batch axis)"));
        std::vector<std::int64_t> perm;
        Dims moved;
        for (std::size_t a = 0; a < dims.size(); ++a)
            if (a != ap && a != aq) {
                perm.push_back(static_cast<std::int64_t>(a));
                moved.push_back(dims[a]);
            }
        perm.push_back(static_cast<std::int64_t>(ap));
        perm.push_back(static_cast<std::int64_t>(aq));
        nlohmann::json shape = nlohmann::json::array();
        for (const auto& d : moved) shape.push_back(d.batch ? nlohmann::json(d.to_string()) : nlohmann::json(d.value));
        shape.push_back(n.value * n.value);
        std::vector<std::int64_t> diagonal;
        for (std::int64_t k = 0; k < n.value; ++k) diagonal.push_back(k * (n.value + 1));
        const std::string step = base + "/diagonal" + std::to_string(pass);
        PSRUN_TRY_ASSIGN(
            auto t,
            node.emit({{"kind", "transpose"}, {"name", step + "_transpose"}, {"inputs", {value}}, {"perm", perm}}));
        PSRUN_TRY_ASSIGN(
            auto r, node.emit({{"kind", "reshape"}, {"name", step + "_reshape"}, {"inputs", {t}}, {"shape", shape}}));
        PSRUN_TRY_ASSIGN(
            auto g,
            node.emit({{"kind", "gather"}, {"name", step}, {"inputs", {r}}, {"axis", -1}, {"indices", diagonal}}));
        value = g;
        moved.push_back(n);
        dims = moved;
        std::string rest;
        for (std::size_t i = 0; i < term.size(); ++i)
            if (i != p && i != q) rest += term[i];
        term = rest + term[p];
    }
}

}  // namespace

Result<void> import_einsum(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto equation, node.string_attr("equation", ""));
    if (equation.empty()) return tl::unexpected(node.refuse("the equation attribute is missing or empty"));
    const std::string what = "equation \"" + equation + "\"";
    std::vector<Dims> dims;
    for (std::size_t i = 0; i < node.input_count(); ++i) {
        if (const ValueInfo* v = node.info(i)) {
            dims.push_back(v->dims);
        } else if (auto shape = node.constant_shape(i)) {
            dims.push_back(constant_dims(*shape));
        } else {
            return tl::unexpected(node.refuse(what + ": the shape of operand " + std::to_string(i) + " is unknown"));
        }
    }
    // Diagonals first (a letter repeated within an operand): the equation after them names each
    // letter once per operand; an implicit output is the one the original equation implies.
    std::vector<std::string> diagonal_values;
    Terms terms = split_terms(equation);
    bool repeats = false;
    for (const auto& term : terms.inputs)
        for (std::size_t i = 0; i < term.size(); ++i)
            repeats = repeats || (term[i] != '.' && term.find(term[i], i + 1) != std::string::npos);
    if (repeats && terms.inputs.size() == dims.size()) {
        if (!terms.output) {
            std::string implied;
            bool dots = false;
            for (char c = 'A'; c <= 'z'; ++c) {
                std::size_t count = 0;
                for (const auto& term : terms.inputs)
                    count += static_cast<std::size_t>(std::count(term.begin(), term.end(), c));
                if (count == 1) implied += c;
            }
            for (const auto& term : terms.inputs) dots = dots || term.find('.') != std::string::npos;
            terms.output = (dots ? "." : "") + implied;
        }
        for (std::size_t i = 0; i < dims.size(); ++i) {
            PSRUN_TRY_ASSIGN(auto v, node.value(i));
            PSRUN_TRY_ASSIGN(auto taken, take_diagonals(node, terms.inputs[i], v, dims[i],
                                                        node.node_name() + "/" + std::to_string(i), what));
            diagonal_values.push_back(taken.first);
            dims[i] = taken.second;
        }
        auto spelt = [](const std::string& term) {  // '.' back to "..."
            std::string out;
            for (const char c : term) out += c == '.' ? std::string("...") : std::string(1, c);
            return out;
        };
        equation.clear();
        for (std::size_t i = 0; i < terms.inputs.size(); ++i) equation += (i ? "," : "") + spelt(terms.inputs[i]);
        equation += "->" + spelt(*terms.output);
    }
    // Three or more operands: a chain of pairs, each planned on the previous pair's result.
    std::vector<std::string> pairs = {equation};
    if (dims.size() > 2) {
        auto parsed = parse_einsum(equation, dims.size());
        if (!parsed) return tl::unexpected(node.refuse(what + " " + parsed.error().message));
        pairs = pairwise_einsum(*parsed);
    }
    std::vector<EinsumPlan> plans;
    Dims current = dims.front();
    for (std::size_t k = 0; k < pairs.size(); ++k) {
        std::vector<Dims> operands = pairs.size() == 1 ? dims : std::vector<Dims>{current, dims[k + 1]};
        auto plan = plan_einsum(pairs[k], operands);
        if (!plan) {
            const std::string step = pairs.size() == 1 ? "" : " (as the pair \"" + pairs[k] + "\")";
            return tl::unexpected(node.refuse(what + step + " " + plan.error().message));
        }
        current = plan->dims;
        plans.push_back(std::move(*plan));
    }
    std::vector<std::string> values = diagonal_values;
    for (std::size_t i = values.size(); i < dims.size(); ++i) {
        PSRUN_TRY_ASSIGN(auto v, node.value(i));
        values.push_back(v);
    }
    const std::string base = node.node_name();
    if (plans.size() == 1) {
        PSRUN_TRY_ASSIGN(auto out, emit_plan(node, plans.front(), values, base, base, what));
        node.bind_output(0, out);
        return {};
    }
    std::string result = values.front();
    for (std::size_t k = 0; k < plans.size(); ++k) {
        const std::string pair_base = base + "/pair" + std::to_string(k);
        const std::string last = k + 1 == plans.size() ? base : pair_base;
        PSRUN_TRY_ASSIGN(result, emit_plan(node, plans[k], {result, values[k + 1]}, pair_base, last, what));
    }
    node.bind_output(0, result);
    return {};
}

}  // namespace psrun::nn
