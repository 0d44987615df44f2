// ReadingChoices (workerd/onnx/reading_choices.h): the order of the walks over the readings of a
// fixed batch of 1, and their end.
#include "workerd/onnx/reading_choices.h"

#include <catch2/catch.hpp>

namespace psrun {
namespace {

TEST_CASE("readings of a batch of 1: the last choice the failure depends on moves first; the walks end", "[onnx]") {
    onnx_io::ReadingChoices c;
    const auto all = [](int) { return true; };
    // Walk 1: nodes 3 (2 readings), 7 (3), 9 (2); it fails after them.
    CHECK(c.pick(2, 3) == 0);
    CHECK(c.pick(3, 7) == 0);
    CHECK(c.pick(2, 9) == 0);
    REQUIRE(c.next(all));
    CHECK((c.pick(2, 3) == 0 && c.pick(3, 7) == 0 && c.pick(2, 9) == 1));
    // Walk 2 fails where only nodes 3 and 7 feed: 9's choice does not matter; 7 moves on.
    REQUIRE(c.next([](int node) { return node != 9; }));
    CHECK(c.pick(2, 3) == 0);
    CHECK(c.pick(3, 7) == 1);
    CHECK(c.pick(2, 9) == 0);  // a choice after the one moved starts again
    CHECK(c.changed() == 1);
    // A walk that failed before its third choice: the choices after the failure were not reached.
    c.rewind();
    CHECK(c.pick(2, 3) == 0);
    CHECK(c.pick(3, 7) == 1);
    REQUIRE(c.next(all));
    CHECK((c.pick(2, 3) == 0 && c.pick(3, 7) == 2));
    REQUIRE(c.next(all));
    CHECK(c.pick(2, 3) == 1);
    CHECK(c.pick(3, 7) == 0);
    // Every combination of the choices it depends on tried: no further walk.
    REQUIRE(c.next([](int node) { return node == 7; }));
    CHECK((c.pick(2, 3) == 1 && c.pick(3, 7) == 1));
    REQUIRE(c.next([](int node) { return node == 7; }));
    CHECK((c.pick(2, 3) == 1 && c.pick(3, 7) == 2));
    CHECK_FALSE(c.next([](int node) { return node == 7; }));
    // A graph that differs from the choices replayed (another count): chosen again from there.
    onnx_io::ReadingChoices d;
    CHECK(d.pick(2, 1) == 0);
    REQUIRE(d.next(all));
    CHECK(d.pick(2, 1) == 1);
    d.rewind();
    CHECK(d.pick(3, 1) == 0);
    CHECK_FALSE(d.next([](int) { return false; }));
}

}  // namespace
}  // namespace psrun
