// CSV (RFC 4180 quoting, line numbers in errors) and .npz tables (written by NumPy itself) into
// feature, token, regression and class data, columns and arrays chosen by name.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "test/workerd/data_files.h"
#include "workerd/data/csv_reader.h"
#include "workerd/data/reader_common.h"
#include "workerd/data/table_reader.h"

namespace psrun::worker {
namespace {

using test::Bytes;

Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }

ModelInput features(std::int64_t f, int classes) {
    ModelInput m{"mlp", 1, 1, 1, classes};
    m.input = InputKind::kFeatures;
    m.length = f;
    return m;
}

std::vector<std::vector<std::string>> rows_of(std::string_view csv) {
    std::vector<std::vector<std::string>> rows;
    auto ok = parse_csv(csv, ',', "t.csv", [&](const std::vector<std::string>& f, std::size_t) {
        rows.push_back(f);
        return Result<void>{};
    });
    INFO((ok ? std::string() : ok.error().message));
    REQUIRE(ok);
    return rows;
}

std::string csv_error(std::string_view csv) {
    auto ok = parse_csv(csv, ',', "t.csv", [](const std::vector<std::string>&, std::size_t) { return Result<void>{}; });
    REQUIRE_FALSE(ok);
    return ok.error().message;
}

}  // namespace

TEST_CASE("CSV: quoting, CRLF, blank lines, a byte order mark; errors name the line", "[table]") {
    const auto rows = rows_of(
        "\xEF\xBB\xBF"
        "a,b,c\r\n1,\"x, y\",\"say \"\"hi\"\"\"\r\n\r\n2,\"two\nlines\",\n");
    REQUIRE(rows.size() == 3);
    CHECK(rows[0] == std::vector<std::string>{"a", "b", "c"});
    CHECK(rows[1] == std::vector<std::string>{"1", "x, y", "say \"hi\""});
    CHECK(rows[2] == std::vector<std::string>{"2", "two\nlines", ""});
    CHECK(rows_of("a\n1").size() == 2);  // no final line break
    CHECK(csv_error("a,b\n1,2\n3\n") == "t.csv: line 3: 1 fields, but the header names 2 columns");
    CHECK(csv_error("a,b\n1,\"2\n") == "t.csv: line 2: a quoted field is not closed before the end of the file");
    CHECK(csv_error("a,b\n1,\"2\"x\n") == "t.csv: line 2: characters after the closing quote of a field");
    CHECK(csv_error("a,b\n1,2\"\n") == "t.csv: line 2: a quote inside an unquoted field (quote the whole field)");
    CHECK(csv_error("") == "t.csv: empty (a CSV file starts with a header line)");
}

TEST_CASE("CSV tables: inputs and targets by name, class names, regression, tokens", "[table]") {
    test::DataDir dir;
    const std::string iris = dir.write("iris.csv", text("sepal,petal,species,id\n"
                                                        "5.1,1.4,setosa,1\n"
                                                        "7.0,4.7,versicolor,2\n"
                                                        "6.3,6.0,virginica,3\n"
                                                        "4.9,1.5,setosa,4\n"));
    auto t = load_table(iris, TableFormat::kCsv, {{"sepal", "petal"}, {"species"}}, features(2, 3));
    INFO((t ? std::string() : t.error().message));
    REQUIRE(t);
    CHECK((t->data.input == InputKind::kFeatures && t->data.size() == 4));
    CHECK(t->data.images.f32 == std::vector<float>{5.1f, 1.4f, 7.0f, 4.7f, 6.3f, 6.0f, 4.9f, 1.5f});
    CHECK(t->data.class_names == std::vector<std::string>{"setosa", "versicolor", "virginica"});
    CHECK(t->data.labels == std::vector<std::int32_t>{0, 1, 2, 0});
    CHECK(check_fits_model(t->data, {"x", "y"}, features(2, 3)));

    ModelInput reg = features(1, 0);
    reg.target = TargetKind::kVector;
    reg.target_length = 2;
    auto r = load_table(iris, TableFormat::kCsv, {{"id"}, {"sepal", "petal"}}, reg);
    REQUIRE(r);
    CHECK((r->data.target == TargetKind::kVector && r->data.targets.size() == 8 && r->data.targets[2] == 7.0f));
    CHECK(check_fits_model(r->data, {"x", "y"}, reg));

    ModelInput tokens = features(2, 3);
    tokens.input = InputKind::kTokens;
    tokens.vocabulary = 5;
    auto bad_ids = load_table(iris, TableFormat::kCsv, {{"id", "id"}, {"species"}}, tokens);
    REQUIRE(bad_ids);  // ids 1-4 < 5
    CHECK(bad_ids->data.tokens == std::vector<std::int32_t>{1, 1, 2, 2, 3, 3, 4, 4});
    tokens.vocabulary = 4;
    auto over = load_table(iris, TableFormat::kCsv, {{"id", "id"}, {"species"}}, tokens);
    REQUIRE_FALSE(over);
    CHECK(over.error().message == iris + ": line 5, column 'id': '4' is out of the vocabulary 0-3 of the model mlp");

    auto missing = load_table(iris, TableFormat::kCsv, {{"sepal"}, {"kind"}}, features(1, 3));
    REQUIRE_FALSE(missing);
    CHECK_THAT(missing.error().message,
               Catch::Contains("no column 'kind' (the header names 'sepal', 'petal', 'species', 'id')"));
    auto no_label = load_table(iris, TableFormat::kCsv, {}, features(3, 3));
    REQUIRE_FALSE(no_label);
    CHECK_THAT(no_label.error().message, Catch::Contains("give --targets COLUMN"));
    const std::string broken = dir.write("b.csv", text("x,label\n1.5,0\nabc,1\n"));
    auto nan = load_table(broken, TableFormat::kCsv, {}, features(1, 2));
    REQUIRE_FALSE(nan);
    CHECK(nan.error().message == broken + ": line 3, column 'x': 'abc' is not a number");

    // Pixels 0-255 for an image model stay uint8 (scaled by 1/255 like IDX files).
    const std::string px = dir.write("px.csv", text("label,p0,p1,p2,p3\n3,0,255,17,4\n"));
    auto img = load_table(px, TableFormat::kCsv, {}, ModelInput{"cnn", 1, 2, 2, 10});
    REQUIRE(img);
    CHECK((img->data.input == InputKind::kImage && img->data.images.type == PixelType::kUint8 &&
           img->data.images.u8 == Bytes{0, 255, 17, 4} && img->data.images.height == 2));
}

TEST_CASE(".npz archives written by NumPy: stored and compressed, arrays by name", "[table][numpy]") {
    test::DataDir dir;
    const std::string d = dir.path.string();
    setenv("PSRUN_NPZ_SCRIPT",
           "import numpy as np, sys\n"
           "d = sys.argv[1]\n"
           "x = np.arange(12, dtype=np.float64).reshape(4, 3)\n"
           "np.savez(d + '/plain.npz', x=x, y=np.array([0, 1, 2, 1]), t=np.ones((4, 2), np.float32))\n"
           "np.savez_compressed(d + '/small.npz', features=x.astype(np.float32), labels=np.array([1, 0, 1, 1], "
           "np.uint8),\n"
           "                    ids=np.arange(8, dtype=np.int64).reshape(4, 2))\n",
           1);
    INFO("needs python3-numpy (jobs/setup.sh installs it)");
    REQUIRE(std::system(("/usr/bin/python3 -c \"$PSRUN_NPZ_SCRIPT\" " + d).c_str()) == 0);
    auto plain = load_table(d + "/plain.npz", TableFormat::kNpz, {}, features(3, 3));
    INFO((plain ? std::string() : plain.error().message));
    REQUIRE(plain);
    CHECK((plain->data.images.f32.size() == 12 && plain->data.images.f32[11] == 11.0f));
    CHECK(plain->data.labels == std::vector<std::int32_t>{0, 1, 2, 1});
    auto small = load_table(d + "/small.npz", TableFormat::kNpz, {{"features"}, {"labels"}}, features(3, 2));
    REQUIRE(small);
    CHECK((small->data.labels == std::vector<std::int32_t>{1, 0, 1, 1} && small->data.images.f32[4] == 4.0f));
    ModelInput tok = features(2, 2);
    tok.input = InputKind::kTokens;
    tok.vocabulary = 8;
    auto ids = load_table(d + "/small.npz", TableFormat::kNpz, {{"ids"}, {"labels"}}, tok);
    REQUIRE(ids);
    CHECK((ids->data.token_length == 2 && ids->data.tokens[7] == 7 && ids->data.size() == 4));
    ModelInput reg = features(3, 0);
    reg.target = TargetKind::kVector;
    reg.target_length = 2;
    auto vec = load_table(d + "/plain.npz", TableFormat::kNpz, {{"x"}, {"t"}}, reg);
    REQUIRE(vec);
    CHECK((vec->data.target_length == 2 && vec->data.targets.size() == 8));
    auto absent = load_table(d + "/plain.npz", TableFormat::kNpz, {{"z"}, {}}, features(3, 3));
    REQUIRE_FALSE(absent);
    CHECK(absent.error().message == d + "/plain.npz: no array 'z' (it holds: x, y, t)");
    // A damaged archive: every byte of the compressed one cut off at the end fails cleanly.
    auto bytes = read_maybe_gzip(d + "/small.npz");
    REQUIRE(bytes);
    test::DataDir cut_dir;
    const std::string cut = cut_dir.write("cut.npz", Bytes(bytes->begin(), bytes->end() - 30));
    CHECK_FALSE(load_table(cut, TableFormat::kNpz, {{"features"}, {"labels"}}, features(3, 2)));
}

}  // namespace psrun::worker
