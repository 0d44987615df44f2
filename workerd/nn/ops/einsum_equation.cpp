// parse_einsum (einsum.h): the text of an Einsum equation into its terms, '.' standing for "...".
// The grammar (ONNX's, numpy's and torch.einsum's): terms of letters a-z A-Z separated by ',',
// optionally "->" and the output term; spaces anywhere; at most one "..." per term.
#include <algorithm>
#include <array>
#include <string>

#include "workerd/nn/ops/einsum.h"

namespace psrun::nn {

namespace {

constexpr std::size_t kEinsumMaxText = 1024;

Error einsum_error(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

bool einsum_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string einsum_quoted(char c) {
    if (c >= 0x20 && c < 0x7f) return std::string("'") + c + "'";
    static const char* hex = "0123456789abcdef";
    const auto u = static_cast<unsigned char>(c);
    return std::string("byte 0x") + hex[u >> 4] + hex[u & 15];
}

// One term (no spaces) into letters and '.' for its ellipsis; `what` names it in errors.
Result<std::string> einsum_term(std::string_view text, const std::string& what, bool output) {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
        const char c = text[i];
        if (einsum_letter(c)) {
            if (out.find(c) != std::string::npos)
                return tl::unexpected(
                    einsum_error("repeats '" + std::string(1, c) + "' within " + what +
                                 (output ? "" : ": a diagonal or trace, which the importer does not lower")));
            out += c;
            ++i;
        } else if (c == '.') {
            if (text.substr(i, 3) != "...") return tl::unexpected(einsum_error("has a '.' outside \"...\" in " + what));
            if (out.find('.') != std::string::npos)
                return tl::unexpected(einsum_error("has more than one \"...\" in " + what));
            out += '.';
            i += 3;
        } else {
            return tl::unexpected(einsum_error("has " + einsum_quoted(c) + " in " + what +
                                               ": terms are letters a-z A-Z and at most one \"...\""));
        }
    }
    return out;
}

}  // namespace

Result<EinsumEquation> parse_einsum(std::string_view text, std::size_t operands) {
    if (text.size() > kEinsumMaxText)
        return tl::unexpected(einsum_error("is " + std::to_string(text.size()) + " characters long (at most " +
                                           std::to_string(kEinsumMaxText) + ")"));
    std::string compact;
    for (const char c : text)
        if (c != ' ') compact += c;
    const auto arrow = compact.find("->");
    if (arrow != std::string::npos && compact.find("->", arrow + 2) != std::string::npos)
        return tl::unexpected(einsum_error("has more than one \"->\""));
    const std::string left = compact.substr(0, arrow);
    EinsumEquation eq;
    eq.explicit_output = arrow != std::string::npos;
    std::size_t start = 0;
    for (;;) {
        const auto comma = left.find(',', start);
        const auto term =
            std::string_view(left).substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        PSRUN_TRY_ASSIGN(
            auto parsed,
            einsum_term(term, "operand " + std::to_string(eq.inputs.size()) + " ('" + std::string(term) + "')", false));
        eq.inputs.push_back(std::move(parsed));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (eq.inputs.size() != operands)
        return tl::unexpected(einsum_error("has " + std::to_string(eq.inputs.size()) + " input term" +
                                           (eq.inputs.size() == 1 ? "" : "s") + " for " + std::to_string(operands) +
                                           " operand" + (operands == 1 ? "" : "s")));
    const bool any_ellipsis = std::any_of(eq.inputs.begin(), eq.inputs.end(),
                                          [](const std::string& t) { return t.find('.') != std::string::npos; });
    std::array<int, 128> seen{};
    for (const auto& t : eq.inputs)
        for (const char c : t) ++seen[static_cast<unsigned char>(c)];
    if (eq.explicit_output) {
        const std::string out_text = compact.substr(arrow + 2);
        PSRUN_TRY_ASSIGN(auto out, einsum_term(out_text, "the output ('" + out_text + "')", true));
        for (const char c : out) {
            if (c == '.' && !any_ellipsis)
                return tl::unexpected(einsum_error("has \"...\" in the output but in no operand"));
            if (c != '.' && seen[static_cast<unsigned char>(c)] == 0)
                return tl::unexpected(einsum_error("has output letter '" + std::string(1, c) + "' in no operand"));
        }
        eq.output = std::move(out);
    } else {
        // Implicit: "..." first, then the letters seen exactly once, in ASCII order (A-Z, a-z).
        if (any_ellipsis) eq.output += '.';
        for (int c = 'A'; c <= 'z'; ++c)
            if (einsum_letter(static_cast<char>(c)) && seen[static_cast<std::size_t>(c)] == 1)
                eq.output += static_cast<char>(c);
    }
    return eq;
}

std::vector<std::string> pairwise_einsum(const EinsumEquation& eq) {
    auto text = [](const std::string& term) {
        std::string t;
        for (const char c : term) t += c == '.' ? std::string("...") : std::string(1, c);
        return t;
    };
    std::vector<std::string> equations;
    std::string current = eq.inputs.front();
    for (std::size_t k = 1; k < eq.inputs.size(); ++k) {
        const std::string& next = eq.inputs[k];
        std::string result;
        if (k + 1 == eq.inputs.size()) {
            result = eq.output;
        } else {
            // What a later operand or the output still reads, in order of first appearance.
            std::string later = eq.output;
            for (std::size_t j = k + 1; j < eq.inputs.size(); ++j) later += eq.inputs[j];
            for (const char c : current + next)
                if (result.find(c) == std::string::npos && (c == '.' || later.find(c) != std::string::npos))
                    result += c;
        }
        equations.push_back(text(current) + "," + text(next) + "->" + text(result));
        current = result;
    }
    return equations;
}

const char* to_string(EinsumRole role) {
    switch (role) {
        case EinsumRole::kBatch: return "batch";
        case EinsumRole::kContracted: return "contracted";
        case EinsumRole::kLeftFree: return "left_free";
        case EinsumRole::kRightFree: return "right_free";
        case EinsumRole::kSummed: return "summed";
    }
    return "?";
}

}  // namespace psrun::nn
