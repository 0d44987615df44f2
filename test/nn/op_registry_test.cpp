// The two tables of operator kinds agree: every schema (op_registry.cpp) has a kernel
// (kernel_registry.cpp) and every kernel a schema, so a kind added to one list and forgotten in
// the other fails here instead of at a user's first network that uses it.
#include <algorithm>
#include <set>
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
