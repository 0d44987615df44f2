// common/option_checks.h: the range validators, the overflow-free seconds conversion, and the walk
// that finds a numeric option without a range check (issue 38).
#include "common/option_checks.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace {

// The validator's message for `text` ("" when it passes).
std::string verdict(const CLI::Validator& v, std::string text) { return v(text); }

}  // namespace

TEST_CASE("number_in refuses nan, inf, text and values outside the range", "[option_checks]") {
    const auto v = psrun::number_in(0, 10, "seconds");
    CHECK(verdict(v, "0").empty());
    CHECK(verdict(v, "10").empty());
    CHECK(verdict(v, "2.5").empty());
    CHECK_THAT(verdict(v, "nan"), Catch::Contains("nan is not a finite number") && Catch::Contains("[0, 10]") &&
                                      Catch::Contains("seconds"));
    CHECK_THAT(verdict(v, "inf"), Catch::Contains("not a finite number"));
    CHECK_THAT(verdict(v, "-inf"), Catch::Contains("not a finite number"));
    CHECK_THAT(verdict(v, "1e300"), Catch::Contains("1e300 is out of range"));
    CHECK_THAT(verdict(v, "-1"), Catch::Contains("out of range"));
    CHECK_THAT(verdict(v, "3x"), Catch::Contains("'3x' is not a number"));
    CHECK_THAT(verdict(v, ""), Catch::Contains("is not a number"));
}

TEST_CASE("number_above excludes its lower bound", "[option_checks]") {
    const auto v = psrun::number_above(0, 1);
    CHECK_THAT(verdict(v, "0"), Catch::Contains("(0, 1]"));
    CHECK(verdict(v, "1e-9").empty());
    CHECK(verdict(v, "1").empty());
    CHECK_FALSE(verdict(v, "1.0001").empty());
}

TEST_CASE("integer_in takes decimal integers only", "[option_checks]") {
    const auto v = psrun::integer_in(-2, 5);
    CHECK(verdict(v, "-2").empty());
    CHECK(verdict(v, "+5").empty());
    CHECK_THAT(verdict(v, "6"), Catch::Contains("6 is out of range: give an integer in [-2, 5]"));
    CHECK_THAT(verdict(v, "1e3"), Catch::Contains("'1e3' is not an integer"));
    CHECK_THAT(verdict(v, "0x3"), Catch::Contains("not an integer"));
    CHECK_THAT(verdict(v, "nan"), Catch::Contains("not an integer"));
    CHECK_THAT(verdict(v, "-"), Catch::Contains("not an integer"));
    CHECK_THAT(verdict(v, "99999999999999999999999"), Catch::Contains("out of range"));
}

TEST_CASE("thread_count is bounded by this host's hardware threads", "[option_checks]") {
    const int most = psrun::max_threads();
    CHECK(most >= 16);
    const auto v = psrun::thread_count(0);
    CHECK(verdict(v, "0").empty());
    CHECK(verdict(v, std::to_string(most)).empty());
    CHECK_THAT(verdict(v, std::to_string(most + 1)), Catch::Contains("hardware threads of this host"));
    CHECK_THAT(verdict(v, "100000"), Catch::Contains("out of range"));
}

TEST_CASE("seconds_to_ms never overflows", "[option_checks]") {
    using std::chrono::milliseconds;
    CHECK(psrun::seconds_to_ms(1.5) == milliseconds(1500));
    CHECK(psrun::seconds_to_ms(0) == milliseconds(0));
    CHECK(psrun::seconds_to_ms(-3) == milliseconds(0));
    CHECK(psrun::seconds_to_ms(std::numeric_limits<double>::quiet_NaN()) == milliseconds(0));
    CHECK(psrun::seconds_to_ms(1e-6) == milliseconds(1));
    CHECK(psrun::seconds_to_ms(1e300) == milliseconds(static_cast<std::int64_t>(psrun::kMaxSeconds * 1000)));
    CHECK(psrun::seconds_to_ms(std::numeric_limits<double>::infinity()).count() > 0);
}

TEST_CASE("a numeric option without a range check is found, in subcommands too", "[option_checks]") {
    CLI::App app("t", "prog");
    int checked = 0, forgotten = 0;
    double rate = 0;
    std::string name;
    bool flag = false;
    app.add_option("--checked", checked)->check(psrun::integer_in(0, 3));
    app.add_option("--name", name);
    app.add_flag("--flag", flag);
    auto* sub = app.add_subcommand("sub");
    sub->add_option("--forgotten", forgotten);
    sub->add_option("--rate", rate)->check(CLI::PositiveNumber);  // CLI11's own check lets nan through
    CHECK(psrun::unchecked_numeric_options(app) == std::vector<std::string>{"prog sub --forgotten", "prog sub --rate"});
    std::ostringstream listing;
    psrun::print_numeric_options(app, listing);
    CHECK(listing.str() ==
          "prog\t--checked\tINT\t[0, 3]\nprog sub\t--forgotten\tINT\tUNCHECKED\n"
          "prog sub\t--rate\tFLOAT\tUNCHECKED\n");
}

TEST_CASE("a parse names the flag, the value and the range", "[option_checks]") {
    CLI::App app("t", "prog");
    double timeout = 1;
    app.add_option("--timeout", timeout)->check(psrun::positive_seconds());
    try {
        app.parse(std::vector<std::string>{"nan", "--timeout"});  // reverse order, as CLI11 wants
        FAIL("nan was accepted");
    } catch (const CLI::ValidationError& e) {
        CHECK_THAT(std::string(e.what()),
                   Catch::Contains("--timeout: nan is not a finite number") && Catch::Contains("(0, 1000000]"));
    }
}
