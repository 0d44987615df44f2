// The two tables of operator kinds, both expanded from ops/kinds.def, agree: every schema
// (op_registry.cpp) has a kernel (kernel_registry.cpp) under its own kind and every kernel a
// schema. And the fuzz dictionaries hold every kind (model.dict) and every ONNX op type a schema
// imports (onnx.dict); the fields are test/fuzz/dict_test.py's.
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "workerd/nn/fusion.h"
#include "workerd/nn/op_schema.h"

using namespace psrun::nn;

TEST_CASE("every operator kind has both a schema and a kernel", "[nn][registry]") {
    std::set<std::string> schemas;
    for (const auto kind : op_kinds()) schemas.emplace(kind);
    std::set<std::string> kernels;
    for (const auto& kind : kernel_kinds()) kernels.insert(kind);

    REQUIRE(schemas.size() > 60);  // the table is populated (it held 71 kinds when written)
    for (const auto& kind : schemas) {
        INFO("kind with a schema: " << kind);
        REQUIRE(find_op(kind) != nullptr);
        CHECK(find_op(kind)->kind == kind);
        CHECK(kernels.count(kind) == 1);
        CHECK(make_kernel(kind) != nullptr);
    }
    for (const auto& kind : kernels) {
        INFO("kind with a kernel: " << kind);
        CHECK(schemas.count(kind) == 1);
        CHECK(find_op(kind) != nullptr);
    }
    CHECK(make_kernel("no_such_kind") == nullptr);
}

namespace {

// The file's text; the test runs in the source root (test/meson.build).
std::string read_text(const char* path) {
    std::ifstream in(path);
    REQUIRE(in);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// `s` in double quotes (appended piecewise: GCC 12's -Wrestrict misfires on "\"" + std::string).
std::string quoted(std::string_view s) {
    std::string q = "\"";
    q += s;
    q += '"';
    return q;
}

bool has_line(const std::string& text, const std::string& line) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
        if (l == line) return true;
    return false;
}

}  // namespace

TEST_CASE("the fuzz dictionaries name every kind and every ONNX op type a schema imports", "[nn][registry]") {
    const std::string model_dict = read_text("test/fuzz/model.dict");
    const std::string onnx_dict = read_text("test/fuzz/onnx.dict");
    for (const auto kind : op_kinds()) {
        std::string entry = "\"\\\"";  // "\"kind\"", a JSON string as the dictionary quotes it
        entry += kind;
        entry += "\\\"\"";
        {
            INFO("test/fuzz/model.dict lacks " << entry);
            CHECK(has_line(model_dict, entry));
        }
        for (const auto op : find_op(kind)->onnx_ops) {
            const std::string onnx_entry = quoted(op);
            INFO("test/fuzz/onnx.dict lacks " << onnx_entry << " (imported by " << kind << ")");
            CHECK(has_line(onnx_dict, onnx_entry));
        }
    }
}
