// libFuzzer target for recipe files (workerd/nn/recipe.h: parse_recipe_text, the grammar of a
// model's "recipe", of --recipe F and of a run's <model-dir>/recipe.json).
// Contract checked: never a crash or hang; a refusal names its source; an accepted recipe
// writes JSON (to_json) that parses back, bare and as {"recipe": ...}, to an equal recipe whose
// JSON is the same, and to_string does not fail.
// Built and run by test/fuzz/fuzz.sh recipe.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "workerd/nn/recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::nn;
    const auto recipe = parse_recipe_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    if (!recipe) {
        if (recipe.error().message.rfind("fuzz: ", 0) != 0) __builtin_trap();
        return 0;
    }
    const nlohmann::json written = to_json(*recipe);
    const auto bare = parse_recipe(written, "again");
    if (!bare || !(*bare == *recipe) || to_json(*bare) != written) __builtin_trap();
    const auto wrapped = parse_recipe_text(nlohmann::json{{"recipe", written}}.dump(), "wrapped");
    if (!wrapped || !(*wrapped == *recipe)) __builtin_trap();
    (void)to_string(*recipe);
    return 0;
}
