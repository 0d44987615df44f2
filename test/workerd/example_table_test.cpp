// Recommender Examples (workerd/data/example_table.h): tf.train.Example records feeding a click
// model by feature name give the ids, weights and values the same rows give as a CSV table
// (bytes_list values as strings, int64_list as integers: int64 7 is the CSV's "007"; an absent
// feature the column's missing id), float_list features filling float inputs, the truncation
// count, and the errors naming the record and the feature.
#include "workerd/data/example_table.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "test/workerd/click_table_fixture.h"
#include "workerd/data/column_spec.h"
#include "workerd/data/column_table.h"
#include "workerd/data/example_proto.h"

namespace psrun::worker {
namespace {

using namespace click_fixture;  // input(), click_inputs(), click_model()

ColumnSpec spec_of(const std::vector<std::string>& columns, std::string_view separator = "") {
    auto spec = parse_column_spec(columns, {"tags_w=tags:mean"}, separator);
    REQUIRE(spec);
    return *spec;
}

std::vector<std::uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

std::vector<std::uint8_t> record(float label, std::vector<float> dense, const std::string& c1, std::int64_t c2,
                                 const std::string& tag) {
    ExampleBuilder b;
    b.add_floats("label", std::vector<float>{label});
    if (!dense.empty()) b.add_floats("D", dense);
    if (!c1.empty()) b.add_bytes("C1", bytes_of(c1));
    if (c2 >= 0) b.add_int64s("C2", std::vector<std::int64_t>{c2});
    if (!tag.empty()) b.add_bytes("T", bytes_of(tag));
    return b.serialize();
}

}  // namespace

TEST_CASE("Examples by feature name give the CSV table's values and ids", "[example_table]") {
    const auto inputs = click_inputs();
    const auto model = click_model();
    const std::vector<std::vector<std::uint8_t>> records = {
        record(1, {0.5f, -2}, "68fd1e64", 7, "tag7"),
        record(0, {}, "", -1, ""),  // D absent: zeros; C1, C2 absent: their missing ids; no tags
    };
    auto ex =
        parse_example_table(records, "x.tfrecord", spec_of({"dense=D", "cat=C1,C2", "tags=T"}), inputs, {}, model);
    INFO((ex ? std::string() : ex.error().message));
    REQUIRE(ex);
    const std::string csv = "label,D0,D1,C1,C2,T\n1,0.5,-2,68fd1e64,007,tag7\n0,,,,,\n";
    auto table = parse_column_table(bytes_of(csv), "x.csv", spec_of({"dense=D0,D1", "cat=C1,C2", "tags=T"}, "|"),
                                    inputs, {}, model);
    REQUIRE(table);
    CHECK(ex->data.images.f32 == table->data.images.f32);
    CHECK(ex->data.targets == table->data.targets);
    REQUIRE(ex->data.columns.size() == 3);
    for (std::size_t k = 0; k < 3; ++k) {
        CHECK(ex->data.columns[k].i32 == table->data.columns[k].i32);
        CHECK(ex->data.columns[k].f32 == table->data.columns[k].f32);
    }
    CHECK(ex->description.starts_with("TFRecord Examples x.tfrecord: 2 rows;"));
}

TEST_CASE("Examples: errors name the record and the feature", "[example_table]") {
    const auto inputs = click_inputs();
    const auto model = click_model();
    const auto spec = spec_of({"dense=D", "cat=C1,C2", "tags=T"});
    auto error = [&](std::vector<std::vector<std::uint8_t>> records, const ColumnSpec& s = ColumnSpec()) {
        auto t = parse_example_table(records, "x.tfrecord", s.given() ? s : spec, inputs, {}, model);
        REQUIRE_FALSE(t);
        CHECK(t.error().code == ErrorCode::kInvalidArgument);
        return t.error().message;
    };
    ExampleBuilder floats_for_ids;
    floats_for_ids.add_floats("label", std::vector<float>{1}).add_floats("C1", std::vector<float>{1.5f});
    CHECK_THAT(error({record(1, {1, 2}, "a", 1, ""), floats_for_ids.serialize()}),
               Catch::Contains("x.tfrecord: record 1: feature 'C1' (float_list): the id input cat takes bytes_list or "
                               "int64_list"));
    CHECK_THAT(error({record(1, {1, 2, 3}, "a", 1, "")}),
               Catch::Contains("record 0: feature 'D' (float_list) has 3 values: the float input dense takes 2"));
    ExampleBuilder no_label;
    no_label.add_floats("D", std::vector<float>{1, 2});
    CHECK_THAT(error({no_label.serialize()}), Catch::Contains("record 0: no target feature 'label'"));
    CHECK_THAT(error({record(1, {NAN, 2}, "a", 1, "")}), Catch::Contains("not a finite number"));
    CHECK_THAT(error({bytes_of("\x0a\x05garbage")}), Catch::Contains("x.tfrecord: record 0: "));
    CHECK_THAT(error({record(1, {1, 2}, "a", 1, "")}, spec_of({"dense=D", "cat=C1,C2", "tags=T"}, "|")),
               Catch::Contains("drop --value-separator"));
    CHECK_THAT(error({record(1, {1, 2}, "a", 1, "")}, spec_of({"dense=D", "cat=C1,C9", "tags=T", "item=C1"})),
               Catch::Contains("has no input 'item'"));
    CHECK_THAT(error({}), Catch::Contains("x.tfrecord: no records"));
}

TEST_CASE("Examples and CSV rows without targets read them as 0 when they are optional", "[example_table]") {
    const auto inputs = click_inputs();
    const auto model = click_model();
    ExampleBuilder b;
    b.add_floats("D", std::vector<float>{1, 2}).add_bytes("C1", bytes_of("a"));
    ColumnSpec spec = spec_of({"dense=D", "cat=C1,C2", "tags=T"});
    CHECK_FALSE(parse_example_table({b.serialize()}, "x.tfrecord", spec, inputs, {}, model));
    spec.targets_optional = true;
    auto ex = parse_example_table({b.serialize(), b.serialize()}, "x.tfrecord", spec, inputs, {}, model);
    INFO((ex ? std::string() : ex.error().message));
    REQUIRE(ex);
    CHECK(ex->data.targets == std::vector<float>{0, 0});
    CHECK_THAT(ex->description, Catch::Contains("no target columns"));
    ColumnSpec csv_spec = spec_of({"dense=D0,D1", "cat=C1,C2", "tags=T"}, "|");
    csv_spec.targets_optional = true;
    auto table = parse_column_table(bytes_of("D0,D1,C1,C2,T\n1,2,a,,\n"), "x.csv", csv_spec, inputs, {}, model);
    REQUIRE(table);
    CHECK(table->data.targets == std::vector<float>{0});
    CHECK(table->data.images.f32 == std::vector<float>{1, 2});
    const auto& ids = ex->data.columns[0].i32;  // cat: the first Example's two ids, as the CSV row's
    CHECK(table->data.columns[0].i32 == std::vector<std::int32_t>(ids.begin(), ids.begin() + 2));
}

}  // namespace psrun::worker
