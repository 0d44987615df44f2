// Recommender tables (docs/data.md "Recommender tables"): the --input-columns/--bag-weights/
// --value-separator specs and their errors, the categorical hash (stable known values, integer
// canonical form, per-column keys), and a CSV feeding a float input, an id input of string
// columns and a multi-valued bag with its weights: padding, truncation, missing values.
#include <catch2/catch.hpp>

#include <xxhash.h>

#include "test/workerd/click_table_fixture.h"
#include "workerd/data/categorical_hash.h"
#include "workerd/data/column_spec.h"
#include "workerd/data/column_table.h"

namespace psrun::worker {
namespace {

std::vector<std::uint8_t> text(std::string_view s) { return {s.begin(), s.end()}; }

using namespace click_fixture;  // input(), click_inputs(), click_model()

ColumnSpec spec_of(const std::vector<std::string>& columns, const std::vector<std::string>& weights = {},
                   std::string_view separator = "") {
    auto spec = parse_column_spec(columns, weights, separator);
    INFO((spec ? std::string() : spec.error().message));
    REQUIRE(spec);
    return *spec;
}

std::string spec_error(const std::vector<std::string>& columns, const std::vector<std::string>& weights = {},
                       std::string_view separator = "") {
    auto spec = parse_column_spec(columns, weights, separator);
    REQUIRE_FALSE(spec);
    CHECK(spec.error().code == ErrorCode::kInvalidArgument);
    return spec.error().message;
}

std::string check_error(const ColumnSpec& spec) {
    auto ok = check_column_spec(spec, click_inputs(), "click");
    REQUIRE_FALSE(ok);
    return ok.error().message;
}

std::int32_t id(std::string_view column, std::string_view value, std::int64_t rows) {
    return hash_bucket(categorical_hash(column, value), rows);
}

const std::vector<std::string> kFeeds = {"dense=I1,I2", "cat=C1,C2", "tags=T"};

}  // namespace

TEST_CASE("categorical hash: XXH3 of the canonical value seeded by the column, stable known values", "[columns]") {
    // The library is XXH3: its published value for the empty input.
    CHECK(XXH3_64bits("", 0) == 0x2D06800538D394C2ULL);
    // Known values (docs/data.md): the same in every run and on every host.
    CHECK(categorical_hash("C1", "68fd1e64") == 0xbb7b4148340ac23eULL);
    CHECK(categorical_hash("C1", "") == 0xa6a7a7b5f160f36aULL);
    CHECK(categorical_hash("C2", "68fd1e64") == 0x8d420e03ce77e537ULL);
    CHECK(categorical_hash("tags", "tag7") == 0x16f0c4ab77244147ULL);
    CHECK(categorical_hash("I1", "7") == 0x811f85742ddedde3ULL);
    CHECK(id("C1", "68fd1e64", 1000) == 790);
    CHECK(id("tags", "tag7", 1000) == 455);
    // The definition, step by step.
    const std::uint64_t seed = XXH3_64bits("C1", 2);
    CHECK(column_seed("C1") == seed);
    CHECK(categorical_hash("C1", "68fd1e64") == XXH3_64bits_withSeed("68fd1e64", 8, seed));
    CHECK(seeded_hash(column_seed("C9"), "x") == categorical_hash("C9", "x"));
    // Integers compare as numbers; everything else as written (spaces around dropped).
    for (const char* same : {"7", "007", "+7", " 7 ", "\t+0007"})
        CHECK(categorical_hash("I1", same) == categorical_hash("I1", "7"));
    CHECK(canonical_value("-0") == "0");
    CHECK(canonical_value("-012") == "-12");
    CHECK(canonical_value("7.0") == "7.0");
    CHECK(canonical_value("0x7") == "0x7");
    CHECK(canonical_value("99999999999999999999") == "99999999999999999999");  // beyond int64: as written
    CHECK(categorical_hash("I1", "7.0") != categorical_hash("I1", "7"));
    CHECK(categorical_hash("C1", "a") != categorical_hash("C2", "a"));
    CHECK(categorical_hash("C1", "a") != categorical_hash("C1", "A"));
    CHECK(hash_bucket(~0ULL, 7) == static_cast<std::int32_t>(~0ULL % 7));
}

TEST_CASE("column specs: the three options and their errors", "[columns]") {
    const auto spec = spec_of({"dense=I1,I2", "cat=C1,C2", "tags=T"}, {"tags_w=tags:mean"}, "|");
    REQUIRE(spec.feeds.size() == 3);
    CHECK(spec.feeds[1].input == "cat");
    CHECK(spec.feeds[1].columns == std::vector<std::string>{"C1", "C2"});
    REQUIRE(spec.weights.size() == 1);
    CHECK(spec.weights[0].bag == "tags");
    CHECK(spec.weights[0].combiner == BagCombiner::kMean);
    CHECK(spec.separator == '|');
    CHECK(spec_of({"x=a"}, {"w=x"}).weights[0].combiner == BagCombiner::kSum);
    CHECK(check_column_spec(spec, click_inputs(), "click"));

    CHECK(spec_error({"dense"}) ==
          "--input-columns dense: expected NAME=COLUMN[,COLUMN...] (a model input and the table columns that feed it, "
          "e.g. dense=I1,I2,I3)");
    CHECK(spec_error({"dense=I1,,I2"}) ==
          "--input-columns dense=I1,,I2: an empty column name (give NAME=COLUMN[,COLUMN...] without empty items)");
    CHECK(spec_error({"x=a", "x=b"}) ==
          "--input-columns x=b: the input x is already given (one --input-columns or --bag-weights per input)");
    CHECK(spec_error({"x=a"}, {"w=x:max"}) ==
          "--bag-weights w=x:max: combiner 'max' (give sum: 1 per value, mean: 1/n of the "
          "cell's n values, or weighted: VALUE:WEIGHT in the cell)");
    CHECK(spec_of({"x=a"}, {"w=x:weighted"}).weights[0].combiner == BagCombiner::kWeighted);
    CHECK(spec_error({"x=a"}, {"w"}).starts_with("--bag-weights w: expected WEIGHTS=BAG[:sum|mean|weighted]"));
    CHECK(spec_error({"x=a"}, {}, "||") ==
          "--value-separator '||': give one character other than a quote or a line break (e.g. '|')");
    CHECK(spec_error({"x=a"}, {}, "\"").starts_with("--value-separator '\"'"));
    CHECK(spec_error({}, {"w=x"}) ==
          "--bag-weights reads a table fed by --input-columns NAME=COLUMN[,COLUMN...]: give --input-columns too");
    CHECK(spec_error({}, {}, "|").starts_with("--value-separator reads a table fed by --input-columns"));
}

TEST_CASE("column specs against the model's inputs: each error names the input and what to give", "[columns]") {
    CHECK(check_error(spec_of({"dense=I1,I2", "cat=C1,C2"}, {"tags_w=tags"}, "|")) ==
          "--bag-weights tags_w=tags: tags is not an id input fed by --input-columns (give the id input whose bag "
          "tags_w weighs)");
    CHECK(check_error(spec_of({"dense=I1", "cat=C1,C2", "tags=T"}, {"tags_w=tags"}, "|")) ==
          "--input-columns dense=I1: the float input dense [2] float takes 2 values per example: name 2 columns (given "
          "1)");
    CHECK(check_error(spec_of({"dense=I1,I2", "cat=C1,C2", "tags=T"}, {"tags_w=tags"})) ==
          "--input-columns tags=T: the id input tags [3] int takes 3 ids per column: give --value-separator C for "
          "multi-valued cells (e.g. '|'), or 3 columns");
    CHECK(
        check_error(spec_of({"dense=I1,I2", "cat=C1,C2", "tags=T,U"}, {"tags_w=tags"}, "|")) ==
        "--input-columns tags=T,U: the id input tags [3] int takes 3 ids per example, not a multiple of its 2 columns "
        "(each column fills width / columns slots)");
    CHECK(check_error(spec_of({"dense=I1,I2", "cat=C1,C2", "tags=T", "item=I"}, {"tags_w=tags"}, "|")) ==
          "--input-columns item=I: model click has no input 'item' (its inputs: dense [2] float, cat [2] int, tags [3] "
          "int, tags_w [3, 1] float)");
    CHECK(check_error(spec_of(kFeeds, {}, "|")) ==
          "model click takes the input tags_w [3, 1] float: give --input-columns tags_w=COLUMN[,COLUMN...] (or "
          "--bag-weights "
          "tags_w=BAG)");
    CHECK(
        check_error(spec_of({"dense=I1,I2", "cat=C1,C2", "tags=T"}, {"tags_w=cat"}, "|")) ==
        "--bag-weights tags_w=cat: the weights input tags_w [3, 1] float must be float with 2 values per example, one "
        "per slot of cat [2] int (e.g. dims [2, 1])");
    auto no_table = click_inputs();
    no_table[1].rows = 0;
    auto ok = check_column_spec(spec_of(kFeeds, {"tags_w=tags"}, "|"), no_table, "click");
    REQUIRE_FALSE(ok);
    CHECK(ok.error().message ==
          "--input-columns cat=C1,C2: no embedding reads the id input cat: categorical values are "
          "hashed into the rows of the embedding that reads the input");
    auto labelled = click_inputs();
    labelled.push_back(input("y", false, 1, "[1] float"));
    labelled.back().labels = true;
    ok = check_column_spec(spec_of({"dense=I1,I2", "cat=C1,C2", "tags=T", "y=label"}, {"tags_w=tags"}, "|"), labelled,
                           "click");
    REQUIRE_FALSE(ok);
    CHECK(ok.error().message ==
          "--input-columns y=label: y is the model's label input, fed from the table's --targets columns");
}

TEST_CASE("a recommender table: dense, string categorical, multi-valued bags with weights, missing values",
          "[columns]") {
    const auto csv = text(
        "label,I1,I2,C1,C2,T\n"
        "1,0.5,-2,68fd1e64,a,tag1|tag7\n"
        "0,,3,,007,\n"  // empty dense (0), empty id cells ("": the column's missing id), no tags
        "1,1e3, 4 ,05db9164,7,t1|t2|t3|t4|t5\n"  // five tags into three slots: two dropped
        "0,2,2,x,b, tag9 ||\n");                 // empty items skipped
    const ModelInput model = click_model();
    auto t = parse_column_table(csv, "rec.csv", spec_of(kFeeds, {"tags_w=tags"}, "|"), click_inputs(), {}, model);
    INFO((t ? std::string() : t.error().message));
    REQUIRE(t);
    const LabeledImages& d = t->data;
    REQUIRE(d.size() == 4);
    CHECK(d.input == InputKind::kFeatures);
    CHECK(d.images.f32 == std::vector<float>{0.5f, -2, 0, 3, 1000, 4, 2, 2});
    CHECK(d.targets == std::vector<float>{1, 0, 1, 0});
    REQUIRE(d.columns.size() == 3);
    CHECK(d.columns[0].name == "cat");
    CHECK(d.columns[0].per_example == 2);
    const std::vector<std::int32_t> cat = {id("C1", "68fd1e64", 50), id("C2", "a", 50),        id("C1", "", 50),
                                           id("C2", "7", 50),        id("C1", "05db9164", 50), id("C2", "7", 50),
                                           id("C1", "x", 50),        id("C2", "b", 50)};
    CHECK(d.columns[0].i32 == cat);
    const std::int32_t pad = id("T", "", 20);
    const std::vector<std::int32_t> tags = {
        id("T", "tag1", 20), id("T", "tag7", 20), pad, pad, pad, pad, id("T", "t1", 20), id("T", "t2", 20),
        id("T", "t3", 20),   id("T", "tag9", 20), pad, pad};
    CHECK(d.columns[1].i32 == tags);
    CHECK(d.columns[2].name == "tags_w");
    CHECK(d.columns[2].f32 == std::vector<float>{1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0});
    CHECK(t->description ==
          "CSV table rec.csv: 4 rows; dense <- 2 columns, cat <- 2 columns (hashed into 50 rows of emb_cat), tags <- 1 "
          "column "
          "(bags of 3, hashed into 20 rows of emb_tags), tags_w <- sum weights of tags, target 'label'; 3 empty cells; "
          "2 values "
          "beyond a bag's slots dropped in 1 rows (truncated)");

    auto mean =
        parse_column_table(csv, "rec.csv", spec_of(kFeeds, {"tags_w=tags:mean"}, "|"), click_inputs(), {}, model);
    REQUIRE(mean);
    CHECK(mean->data.columns[2].f32 ==
          std::vector<float>{0.5f, 0.5f, 0, 0, 0, 0, 1 / 3.0f, 1 / 3.0f, 1 / 3.0f, 1, 0, 0});

    // The same table twice: the same ids (hashing depends on nothing but column and value).
    auto again = parse_column_table(csv, "other.csv", spec_of(kFeeds, {"tags_w=tags"}, "|"), click_inputs(), {}, model);
    REQUIRE(again);
    CHECK(again->data.columns[1].i32 == tags);

    // A TSV, an id input as the primary one (tokens).
    std::vector<TableInput> ids = {input("cat", true, 2, "[2] int", 50, "emb")};
    ModelInput tok{"tok", 1, 1, 1, 2, InputKind::kTokens, 2, 50};
    auto tsv =
        parse_column_table(text("y\tC1\tC2\n1\ta\tb\n0\t\t7\n"), "t.tsv", spec_of({"cat=C1,C2"}), ids, {"y"}, tok);
    INFO((tsv ? std::string() : tsv.error().message));
    REQUIRE(tsv);
    CHECK(tsv->data.input == InputKind::kTokens);
    CHECK(tsv->data.tokens ==
          std::vector<std::int32_t>{id("C1", "a", 50), id("C2", "b", 50), id("C1", "", 50), id("C2", "7", 50)});
    CHECK(tsv->data.labels == std::vector<std::int32_t>{1, 0});

    // The primary input read by a table keyed by raw ids (--raw-ids): the unreduced hashes, as
    // raw_tokens, which check_fits_model takes for a model reading raw ids and refuses otherwise.
    ids[0].raw = true;
    auto raw =
        parse_column_table(text("y\tC1\tC2\n1\ta\tb\n0\t\t7\n"), "t.tsv", spec_of({"cat=C1,C2"}), ids, {"y"}, tok);
    INFO((raw ? std::string() : raw.error().message));
    REQUIRE(raw);
    CHECK(raw->data.tokens.empty());
    CHECK(raw->data.raw_tokens == std::vector<std::uint64_t>{categorical_hash("C1", "a"), categorical_hash("C2", "b"),
                                                             categorical_hash("C1", ""), categorical_hash("C2", "7")});
    CHECK(raw->data.size() == 2);
    ModelInput raw_tok = tok;
    raw_tok.raw_ids = true;
    CHECK(check_fits_model(raw->data, {"t.tsv", "t.tsv"}, raw_tok));
    const auto unkeyed = check_fits_model(raw->data, {"t.tsv", "t.tsv"}, tok);
    REQUIRE_FALSE(unkeyed);
    CHECK_THAT(unkeyed.error().message, Catch::Contains("read as raw ids, but no table keyed by raw ids"));
}

TEST_CASE("recommender tables: errors name the file, the line, the column or the option", "[columns]") {
    const ModelInput model = click_model();
    const auto spec = spec_of(kFeeds, {"tags_w=tags"}, "|");
    const auto error = [&](std::string_view csv, const ColumnSpec& s = {}) {
        auto t = parse_column_table(text(csv), "rec.csv", s.given() ? s : spec, click_inputs(), {}, model);
        REQUIRE_FALSE(t);
        CHECK(t.error().code == ErrorCode::kInvalidArgument);
        return t.error().message;
    };
    CHECK(error("label,I1,I2,C1,C2,T\n1,0.5,x,a,b,c\n") ==
          "rec.csv: line 2, column 'I2': 'x' is not a number (the float input dense)");
    CHECK(error("label,I1,I3,C1,C2,T\n1,0.5,1,a,b,c\n") ==
          "rec.csv: no column 'I2' (the header names 'label', 'I1', 'I3', 'C1', 'C2', 'T') (--input-columns dense)");
    CHECK(error("I1,I2,C1,C2,T\n0.5,1,a,b,c\n")
              .starts_with("rec.csv: give --targets COLUMN[,COLUMN...] (no column is named 'label'"));
    CHECK(error("label,I1,I2,C1,C2,T\n") == "rec.csv: a header but no rows");
    CHECK(error("label,I1,I2,C1,C2,T\n1,1,1,a,b,c\n", spec_of(kFeeds, {"tags_w=tags"}, ",")) ==
          "rec.csv: --value-separator ',' is the table's delimiter (give another character, e.g. '|')");
    CHECK(error("label,I1,I2,C1,C2,T\n1,1,1,a,b,c\n", spec_of(kFeeds, {}, "|"))
              .starts_with("model click takes the input tags_w"));
}

TEST_CASE("weighted bags: VALUE:WEIGHT cells (--bag-weights W=BAG:weighted)", "[columns]") {
    const auto csv = text("label,I1,I2,C1,C2,T\n1,0,0,a,b,tag1:0.5|tag7 : -2|tag9\n0,0,0,a,b,\n");
    auto t = parse_column_table(csv, "w.csv", spec_of(kFeeds, {"tags_w=tags:weighted"}, "|"), click_inputs(), {},
                                click_model());
    INFO((t ? std::string() : t.error().message));
    REQUIRE(t);
    const std::int32_t pad = id("T", "", 20);
    CHECK(t->data.columns[1].i32 ==
          std::vector<std::int32_t>{id("T", "tag1", 20), id("T", "tag7", 20), id("T", "tag9", 20), pad, pad, pad});
    CHECK(t->data.columns[2].f32 == std::vector<float>{0.5f, -2, 1, 0, 0, 0});
    CHECK(t->description.find("tags_w <- the cells' own weights of tags") != std::string::npos);
    auto bad = parse_column_table(text("label,I1,I2,C1,C2,T\n1,0,0,a,b,tag1:x|tag7\n"), "w.csv",
                                  spec_of(kFeeds, {"tags_w=tags:weighted"}, "|"), click_inputs(), {}, click_model());
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message ==
          "w.csv: line 2, column 'T': 'tag1:x' has no number after its ':' (a weighted bag reads VALUE:WEIGHT)");
    // Without :weighted a ':' is part of the value.
    auto plain = parse_column_table(text("label,I1,I2,C1,C2,T\n1,0,0,a,b,tag1:x\n"), "w.csv",
                                    spec_of(kFeeds, {"tags_w=tags"}, "|"), click_inputs(), {}, click_model());
    REQUIRE(plain);
    CHECK(plain->data.columns[1].i32[0] == id("T", "tag1:x", 20));
}

TEST_CASE("tables without a header line (--column-names) and other delimiters (--delimiter)", "[columns]") {
    // Criteo's day files: tab-separated, no header, the label first.
    ColumnSpec spec = spec_of(kFeeds, {"tags_w=tags:mean"}, "|");
    REQUIRE(parse_table_layout("label,I1,I2,C1,C2,T", "tab", spec));
    CHECK(spec.delimiter == '\t');
    CHECK(spec.header.size() == 6);
    const auto tsv = text("1\t0.5\t-2\t68fd1e64\ta\ttag1|tag7\n0\t\t3\t\t007\t\n");
    auto t = parse_column_table(tsv, "day_0", spec, click_inputs(), {}, click_model());
    INFO((t ? std::string() : t.error().message));
    REQUIRE(t);
    CHECK(t->data.size() == 2);  // the first line is a row
    CHECK(t->data.images.f32 == std::vector<float>{0.5f, -2, 0, 3});
    CHECK(t->data.columns[0].i32 ==
          std::vector<std::int32_t>{id("C1", "68fd1e64", 50), id("C2", "a", 50), id("C1", "", 50), id("C2", "7", 50)});
    CHECK(t->data.columns[2].f32 == std::vector<float>{0.5f, 0.5f, 0, 0, 0, 0});
    auto short_line = parse_column_table(text("1\t0.5\n"), "day_0", spec, click_inputs(), {}, click_model());
    REQUIRE_FALSE(short_line);
    CHECK(short_line.error().message == "day_0: line 1: 2 fields, but --column-names names 6 columns");
    ColumnSpec semi = spec_of(kFeeds, {"tags_w=tags"}, "|");
    REQUIRE(parse_table_layout("", ";", semi));
    auto semicolons = parse_column_table(text("label;I1;I2;C1;C2;T\n1;1;2;a;b;c\n"), "t.csv", semi, click_inputs(), {},
                                         click_model());
    REQUIRE(semicolons);
    CHECK(semicolons->data.images.f32 == std::vector<float>{1, 2});

    const auto layout_error = [](std::string_view names, std::string_view delimiter) {
        ColumnSpec s = spec_of({"x=a"}, {}, "|");
        auto ok = parse_table_layout(names, delimiter, s);
        REQUIRE_FALSE(ok);
        return ok.error().message;
    };
    CHECK(layout_error("a,,b", "") ==
          "--column-names: an empty name at position 2 (give NAME,NAME,... one per column of the table)");
    CHECK(layout_error("a,b,a", "") == "--column-names: 'a' names two columns (give each column its own name)");
    CHECK(layout_error("", "semicolon") ==
          "--delimiter 'semicolon': give comma, tab or one character other than a quote or a line break");
    CHECK(layout_error("", "|") ==
          "--delimiter and --value-separator are both '|': the values of a cell need a separator of their own");
}

}  // namespace psrun::worker
