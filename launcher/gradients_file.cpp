#include "launcher/gradients_file.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/utf8.h"

namespace psrun::launcher {

namespace {

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};

// Buffered text into a FILE*; a write error sticks until close().
class JsonWriter {
  public:
    explicit JsonWriter(std::FILE* f) : file_(f) {}
    void text(std::string_view s) { std::fwrite(s.data(), 1, s.size(), file_); }
    void string(const std::string& s) { text(json_text(nlohmann::json(s))); }
    void number(double v) {
        if (!std::isfinite(v)) return text("null");
        char digits[32];
        const auto r = std::to_chars(digits, digits + sizeof digits, v);
        text(std::string_view(digits, static_cast<std::size_t>(r.ptr - digits)));
    }
    void floats(std::span<const float> values) {
        text("[");
        char digits[32];
        for (std::size_t i = 0; i < values.size(); ++i) {
            if (i > 0) text(",");
            if (!std::isfinite(values[i])) {
                text("null");
                continue;
            }
            const auto r = std::to_chars(digits, digits + sizeof digits, values[i]);
            text(std::string_view(digits, static_cast<std::size_t>(r.ptr - digits)));
        }
        text("]");
    }

  private:
    std::FILE* file_;
};

}  // namespace

void write_gradients_file(const std::string& path, const nn::ModelDescription& model, const nn::GradientCheck& check) {
    std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "w"));
    if (!file) throw UsageError("cannot write " + path);
    JsonWriter out(file.get());
    out.text("{\"loss\":");
    out.number(check.loss);
    out.text(",\"outputs\":");
    out.floats(check.outputs);
    out.text(",\"tensors\":{");
    bool first = true;
    for (const auto& t : model.tensors) {
        if (t.cls != nn::TensorClass::kTrainable) continue;
        if (!first) out.text(",");
        first = false;
        out.string(t.name);
        out.text(":{\"shape\":");
        out.text(json_text(nlohmann::json(t.shape)));
        const auto at = static_cast<std::size_t>(t.offset), size = static_cast<std::size_t>(t.size);
        out.text(",\"gradient\":");
        out.floats(std::span<const float>(check.gradients).subspan(at, size));
        if (!check.bf16_gradients.empty()) {
            out.text(",\"bf16_gradient\":");
            out.floats(std::span<const float>(check.bf16_gradients).subspan(at, size));
        }
        out.text("}");
    }
    out.text("}");
    if (!check.input_gradients.empty()) {
        out.text(",\"inputs\":{");
        first = true;
        for (std::size_t i = 0; i < model.inputs.size(); ++i) {
            if (check.input_gradients[i].empty()) continue;
            if (!first) out.text(",");
            first = false;
            out.string(model.inputs[i].name);
            out.text(":{\"gradient\":");
            out.floats(check.input_gradients[i]);
            out.text("}");
        }
        out.text("}");
    }
    out.text("}\n");
    const bool failed = std::ferror(file.get()) != 0;
    if (std::fclose(file.release()) != 0 || failed) throw UsageError("cannot write " + path);
}

}  // namespace psrun::launcher
