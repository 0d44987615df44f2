// --augment (workerd/augment.h): the spec parser's refusals, and what apply() does to images whose
// pixels say where they came from: a flip mirrors each row, a crop shifts by at most P with zeros
// in, the draws repeat for (seed, worker, step) and differ across workers and steps.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "workerd/augment.h"

using psrun::worker::Augmenter;
using psrun::worker::AugmentSpec;
using psrun::worker::parse_augment;

namespace {

constexpr std::int64_t kN = 64, kC = 2, kH = 6, kW = 5;

// Pixel (e, c, y, x) holds 1 + a code of its own position, so a moved pixel tells where it was.
std::vector<float> coded() {
    std::vector<float> v(static_cast<std::size_t>(kN * kC * kH * kW));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 1.0f + static_cast<float>(i);
    return v;
}

float at(const std::vector<float>& v, std::int64_t e, std::int64_t c, std::int64_t y, std::int64_t x) {
    return v[static_cast<std::size_t>(((e * kC + c) * kH + y) * kW + x)];
}

}  // namespace

TEST_CASE("--augment parses flip and crop=P and refuses anything else by name", "[augment]") {
    CHECK_FALSE(parse_augment("none")->enabled());
    const auto both = parse_augment("flip,crop=4");
    REQUIRE(both);
    CHECK(both->flip);
    CHECK(both->crop_padding == 4);
    CHECK(parse_augment("crop=1")->crop_padding == 1);
    for (const char* bad : {"flop", "crop=0", "crop=65", "crop=", "crop=x", "flip,", "flip,,crop=2"}) {
        INFO(bad);
        const auto r = parse_augment(bad);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains("is not flip or crop=P"));
    }
}

TEST_CASE("flip mirrors rows, crop shifts by at most P with zeros in, reproducibly per worker and step", "[augment]") {
    const auto original = coded();
    auto flipped = original;
    Augmenter flip(AugmentSpec{true, 0}, 7, 0);
    flip.apply(flipped, kN, kC, kH, kW, 3);
    int mirrored = 0;
    for (std::int64_t e = 0; e < kN; ++e) {
        const bool same = at(flipped, e, 0, 0, 0) == at(original, e, 0, 0, 0);
        mirrored += same ? 0 : 1;
        for (std::int64_t c = 0; c < kC; ++c)
            for (std::int64_t y = 0; y < kH; ++y)
                for (std::int64_t x = 0; x < kW; ++x)
                    CHECK(at(flipped, e, c, y, x) == at(original, e, c, y, same ? x : kW - 1 - x));
    }
    CHECK(mirrored > kN / 4);  // about half of them, with a fair coin
    CHECK(mirrored < 3 * kN / 4);

    auto cropped = original;
    Augmenter crop(AugmentSpec{false, 2}, 7, 0);
    crop.apply(cropped, kN, kC, kH, kW, 3);
    int moved = 0;
    for (std::int64_t e = 0; e < kN; ++e) {
        // Find the shift from a pixel that stayed inside, then check every pixel against it.
        std::int64_t dy = 99, dx = 99;
        for (std::int64_t y = 0; y < kH && dy == 99; ++y)
            for (std::int64_t x = 0; x < kW && dy == 99; ++x) {
                const float v = at(cropped, e, 0, y, x);
                if (v == 0.0f) continue;
                const auto within = static_cast<std::int64_t>(v - 1.0f) - e * kC * kH * kW;
                dy = within / kW - y;
                dx = within % kW - x;
            }
        REQUIRE(std::abs(dy) <= 2);
        REQUIRE(std::abs(dx) <= 2);
        moved += (dy != 0 || dx != 0) ? 1 : 0;
        for (std::int64_t c = 0; c < kC; ++c)
            for (std::int64_t y = 0; y < kH; ++y)
                for (std::int64_t x = 0; x < kW; ++x) {
                    const std::int64_t sy = y + dy, sx = x + dx;
                    const bool inside = sy >= 0 && sy < kH && sx >= 0 && sx < kW;
                    CHECK(at(cropped, e, c, y, x) == (inside ? at(original, e, c, sy, sx) : 0.0f));
                }
    }
    CHECK(moved > kN / 2);  // 24 of 25 shifts move the image

    auto again = original, other_worker = original, next_step = original;
    Augmenter crop_again(AugmentSpec{false, 2}, 7, 0), crop_worker1(AugmentSpec{false, 2}, 7, 1);
    crop_again.apply(again, kN, kC, kH, kW, 3);
    crop_worker1.apply(other_worker, kN, kC, kH, kW, 3);
    crop_again.apply(next_step, kN, kC, kH, kW, 4);
    CHECK(again == cropped);
    CHECK(other_worker != cropped);
    CHECK(next_step != cropped);
}
