#include "launcher/ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <set>

using namespace psrun::launcher;

TEST_CASE("derived ports stay below the ephemeral range and differ per local id", "[ports]") {
    std::set<int> seen;
    for (std::uint32_t job : {0u, 1u, 398u, 399u, 123456u, 4294967295u})
        for (std::uint32_t step : {0u, 1u, 3u, 4294967294u}) {
            for (int local = 0; local < kPortsPerStep; ++local) {
                const int port = *derived_port(job, step, local, kDefaultPortBase);
                CHECK(port >= kDefaultPortBase);
                CHECK(port < 32768);
            }
        }
    const int p0 = *derived_port(7, 0, 0, kDefaultPortBase);
    CHECK(*derived_port(7, 0, 5, kDefaultPortBase) == p0 + 5);
}

TEST_CASE("derived ports of nearby jobs never collide", "[ports]") {
    // Any two (job, step) with job ids in a window of 99 and steps 0..3 get disjoint blocks.
    for (std::uint32_t first : {1u, 5000u, 4294967000u}) {
        std::set<int> ports;
        size_t count = 0;
        for (std::uint32_t job = first; job < first + 99; ++job)
            for (std::uint32_t step = 0; step < kStepSlots; ++step)
                for (int local = 0; local < kPortsPerStep; local += 31) {
                    ports.insert(*derived_port(job, step, local, kDefaultPortBase));
                    ++count;
                }
        CHECK(ports.size() == count);
    }
    // The same step number collides only when job ids differ by a multiple of the block count.
    const int blocks = *port_block_count(kDefaultPortBase);
    CHECK(blocks == 399);
    for (std::uint32_t d = 1; d < static_cast<std::uint32_t>(blocks); ++d)
        REQUIRE(*derived_port(1000, 0, 0, kDefaultPortBase) != *derived_port(1000 + d, 0, 0, kDefaultPortBase));
}

TEST_CASE("port base and local id are validated", "[ports]") {
    CHECK_FALSE(derived_port(1, 0, 0, 40000));  // ephemeral range
    CHECK_FALSE(derived_port(1, 0, 0, 80));
    CHECK_FALSE(derived_port(1, 0, 0, 65530));
    CHECK(*derived_port(1, 0, 0, 61000) >= 61000);
    const auto too_many = derived_port(1, 0, kPortsPerStep, kDefaultPortBase);
    REQUIRE_FALSE(too_many);
    CHECK_THAT(too_many.error().message, Catch::Contains("--resv-ports"));
}

TEST_CASE("a port in use is reported, a free one passes", "[ports]") {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    const int port = ntohs(addr.sin_port);
    const auto busy = check_port_free("127.0.0.1", port);
    REQUIRE_FALSE(busy);
    CHECK_THAT(busy.error().message, Catch::Contains("already in use"));
    ::close(fd);
    const auto ports = free_local_ports(3);
    REQUIRE(ports);
    CHECK(std::set<int>(ports->begin(), ports->end()).size() == 3);
    CHECK(check_port_free("127.0.0.1", (*ports)[0]));
    CHECK_FALSE(check_port_free("no-such-host.invalid", 20000));
}
