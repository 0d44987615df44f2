// --clip-global-norm's norm (workerd/global_norm.h) counts every piece it is given, a sparse
// table's gradient rows beside the dense tensors, and scales all of them.
#include <catch2/catch.hpp>

#include <cmath>
#include <span>
#include <vector>

#include "workerd/global_norm.h"

namespace psrun::worker {

TEST_CASE("the global norm counts every piece (a sparse table's rows beside the tensors) and scales all of them",
          "[trainer][clip]") {
    std::vector<float> dense{3.0f, 0.0f};
    std::vector<float> rows{0.0f, 4.0f, 0.0f, 12.0f};  // two gradient rows of width 2
    std::vector<std::span<float>> pieces{dense, rows};
    const GlobalNorm kept = clip_by_global_norm(pieces, 100.0);
    CHECK(kept.norm == Approx(13.0));  // sqrt(9 + 16 + 144): the rows count
    CHECK_FALSE(kept.clipped);
    CHECK(rows == std::vector<float>{0.0f, 4.0f, 0.0f, 12.0f});
    const GlobalNorm clipped = clip_by_global_norm(pieces, 6.5);
    CHECK(clipped.norm == Approx(13.0));
    CHECK(clipped.clipped);
    CHECK(dense == std::vector<float>{1.5f, 0.0f});
    CHECK(rows == std::vector<float>{0.0f, 2.0f, 0.0f, 6.0f});  // the rows scaled with the tensors
    std::vector<float> bad{std::nanf(""), 1.0f};
    std::vector<std::span<float>> bad_pieces{bad};
    CHECK_FALSE(clip_by_global_norm(bad_pieces, 1.0).clipped);  // a non-finite norm leaves it alone
    CHECK(bad[1] == 1.0f);
}

}  // namespace psrun::worker
