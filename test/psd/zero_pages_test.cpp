// Zero pages and their huge pages after a fork (psd/zero_pages.h): a child sharing an array splits
// each 2 MiB page the parent writes; HugePageCollapser makes them huge again, without backing
// pages never written. Needs transparent huge pages (madvise or always) and Linux >= 6.1
// (MADV_COLLAPSE): where the host lacks either, the collapse cases warn and check nothing more.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "psd/zero_pages.h"

using psrun::psd::HugePageCollapser;
using psrun::psd::ZeroPages;

namespace {

constexpr std::size_t kMiB = 1u << 20;

struct Backing {
    std::size_t rss = 0, huge = 0;  // bytes of [p, p + bytes) resident, and of those in huge pages
};

// /proc/self/smaps summed over the mappings inside [p, p + bytes).
Backing backing(const void* p, std::size_t bytes) {
    const auto lo = reinterpret_cast<std::uintptr_t>(p), hi = lo + bytes;
    std::ifstream smaps("/proc/self/smaps");
    Backing b;
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        std::uintptr_t start = 0, end = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> start >> dash >> end && dash == '-') {
            inside = start >= lo && end <= hi;
            continue;
        }
        std::istringstream field(line);
        std::string key;
        std::size_t kb = 0;
        if (!inside || !(field >> key >> kb)) continue;
        if (key == "Rss:") b.rss += kb * 1024;
        if (key == "AnonHugePages:") b.huge += kb * 1024;
    }
    return b;
}

bool huge_pages_on() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return !s.empty() && s.find("[never]") == std::string::npos;
}

}  // namespace

TEST_CASE("zero pages read as zero and take memory only where written", "[zero_pages]") {
    ZeroPages<float> a(64 * kMiB / sizeof(float));
    CHECK(a[12345] == 0.0f);
    CHECK(backing(a.data(), 64 * kMiB).rss < 4 * kMiB);
    for (std::size_t i = 0; i < 8 * kMiB / sizeof(float); ++i) a[i] = 1.0f;
    const Backing b = backing(a.data(), 64 * kMiB);
    CHECK(b.rss >= 8 * kMiB);
    CHECK(b.rss <= 10 * kMiB);
}

TEST_CASE("huge pages split by a fork's copy-on-write are collapsed again, the rest left unbacked", "[zero_pages]") {
    if (!huge_pages_on()) {
        WARN("transparent huge pages are off on this host: nothing to collapse");
        return;
    }
    constexpr std::size_t kBytes = 64 * kMiB, kWritten = 32 * kMiB;
    ZeroPages<char> a(kBytes);
    for (std::size_t i = 0; i < kWritten; i += 4096) a[i] = 1;
    if (backing(a.data(), kBytes).huge < kWritten / 2) {
        WARN("the kernel gave no huge pages to a MADV_HUGEPAGE mapping: nothing to collapse");
        return;
    }
    int go[2];
    REQUIRE(::pipe(go) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {  // shares the pages until the parent has written them all
        char c;
        (void)!::read(go[0], &c, 1);
        ::_exit(0);
    }
    for (std::size_t i = 0; i < kWritten; i += 4096) a[i] = 2;  // copy on write: 4 KiB each
    const Backing split = backing(a.data(), kBytes);
    (void)!::write(go[1], "x", 1);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    ::close(go[0]);
    ::close(go[1]);
    CHECK(split.huge < kWritten / 2);

    HugePageCollapser collapser;
    collapser.start();
    collapser.wait();
    const Backing after = backing(a.data(), kBytes);
    if (after.huge == split.huge) {
        WARN("MADV_COLLAPSE changed nothing (Linux < 6.1?)");
        return;
    }
    CHECK(after.huge >= kWritten - 2 * kMiB);  // the written half in huge pages again
    CHECK(after.rss <= kWritten + 2 * kMiB);   // the half never written still unbacked
    CHECK(a[0] == 2);
    CHECK(a[kWritten - 4096] == 2);
    CHECK(a[kWritten + 4096] == 0);
}

TEST_CASE("a collapse run stops early and skips arrays unmapped meanwhile", "[zero_pages]") {
    HugePageCollapser collapser;
    {
        ZeroPages<char> gone(256 * kMiB);
        for (std::size_t i = 0; i < 256 * kMiB; i += 4096) gone[i] = 1;
        collapser.start();
    }  // unmapped while the run may still hold it in its list
    ZeroPages<char> kept(4 * kMiB);
    kept[0] = 3;
    collapser.start();  // stops the first run, starts another
    collapser.stop();
    collapser.stop();  // twice: nothing to stop
    CHECK(kept[0] == 3);
}
