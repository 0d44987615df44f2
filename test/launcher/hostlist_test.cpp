#include "launcher/hostlist.h"

#include <catch2/catch.hpp>

using psrun::launcher::check_hostlist;
using psrun::launcher::expand_hostlist;

using Hosts = std::vector<std::string>;

TEST_CASE("hostlist expands ranges, lists and keeps zero padding", "[hostlist]") {
    CHECK(*expand_hostlist("n1") == Hosts{"n1"});
    CHECK(*expand_hostlist("localhost") == Hosts{"localhost"});
    CHECK(*expand_hostlist("n[1-3]") == Hosts{"n1", "n2", "n3"});
    CHECK(*expand_hostlist("n[01-03,07],gpu-a[1-2]") == Hosts{"n01", "n02", "n03", "n07", "gpu-a1", "gpu-a2"});
    CHECK(*expand_hostlist("n[009-011]") == Hosts{"n009", "n010", "n011"});
    CHECK(*expand_hostlist("alpha,beta,gamma") == Hosts{"alpha", "beta", "gamma"});
    CHECK(*expand_hostlist("c457-[011-012]") == Hosts{"c457-011", "c457-012"});
    CHECK(expand_hostlist("rack[1-2]-n[1-2]")->size() == 4);
}

TEST_CASE("hostlist keeps the written order", "[hostlist]") {
    CHECK(*expand_hostlist("n[3,1]") == Hosts{"n3", "n1"});
    CHECK(*expand_hostlist("b1,a1") == Hosts{"b1", "a1"});
    CHECK(*expand_hostlist("n[9-11]") == Hosts{"n9", "n10", "n11"});
}

TEST_CASE("hostlist rejects malformed lists with a message naming the problem", "[hostlist]") {
    struct Bad {
        const char* list;
        const char* why;
    };
    const Bad bad = GENERATE(
        Bad{"n[1-", "never closed"}, Bad{"n[3-1]", "backwards"}, Bad{"n[1-2", "never closed"},
        Bad{"n1-2]", "without '['"}, Bad{"n[[1-2]]", "nested"}, Bad{"n[]", "empty brackets"},
        Bad{"n[a-b]", "bad range"}, Bad{"n[1-2]-ib", "text after ']'"}, Bad{"", "empty"}, Bad{"n1,,n2", "empty host"},
        Bad{"n1,", "ends with ','"}, Bad{"n 1", "unexpected character"}, Bad{"n[1-3,]", "bad range"},
        Bad{"n[1-999999]", "more than"}, Bad{"n[1-2],n2", "appears twice"}, Bad{"n[1--2]", "bad range"});
    CAPTURE(bad.list);
    const auto r = expand_hostlist(bad.list);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == psrun::ErrorCode::kInvalidArgument);
    CHECK_THAT(r.error().message, Catch::Contains(bad.why));
    CHECK_THAT(r.error().message, Catch::Contains("malformed hostlist"));
}

TEST_CASE("check_hostlist counts without expanding", "[hostlist]") {
    CHECK(*check_hostlist("n[1-3],m[01-10]") == 13);
    CHECK(*check_hostlist("r[1-2]n[1-3]") == 6);
    CHECK_FALSE(check_hostlist("n[1-70000]"));
}
