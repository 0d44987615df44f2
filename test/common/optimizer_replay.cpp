// Test tool of optimizer_torch.py: replays fixed gradients through psrun's optimizers and prints
// the parameters, for comparison with torch.optim on the same gradients.
//
// Usage: optimizer_replay FILE [GROUP...]. FILE holds whitespace-separated text:
//   kind learning_rate momentum beta1 beta2 epsilon weight_decay weight_decay_on steps
//   count, then per tensor: rank dim[rank], then per tensor its initial values,
//   then per step, per tensor, its gradient.
// Each tensor, named t0, t1, ..., gets its own Optimizer with the configuration psd gives it
// (OptimizerConfig::for_tensor: decay by rank, or the first GROUP matching its name, each GROUP a
// --param-group value, common/param_groups.h).
// Prints every tensor's final values, one per line (%.9g), in tensor order. Exit 2 on bad input.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/optimizer.h"
#include "common/param_groups.h"

int main(int argc, char** argv) {
    using namespace psrun;
    auto fail = [](const char* what) {
        std::fprintf(stderr, "optimizer_replay: %s\n", what);
        return 2;
    };
    if (argc < 2) return fail("usage: optimizer_replay FILE [GROUP...]");
    std::ifstream in(argv[1]);
    std::string kind_name, decay_on;
    OptimizerConfig c;
    int steps = 0;
    std::size_t count = 0;
    if (!(in >> kind_name >> c.learning_rate >> c.momentum >> c.beta1 >> c.beta2 >> c.epsilon >> c.weight_decay >>
          decay_on >> steps >> count))
        return fail("bad header");
    auto kind = parse_optimizer_kind(kind_name);
    auto on = parse_weight_decay_on(decay_on);
    if (!kind || !on) return fail("bad optimizer kind or weight_decay_on");
    c.kind = *kind;
    c.weight_decay_on = *on;
    for (int i = 2; i < argc; ++i) {
        auto group = parse_param_group(argv[i]);
        if (!group) return fail(group.error().message.c_str());
        c.groups.push_back(*group);
    }
    std::vector<std::size_t> ranks(count), sizes(count, 1);
    for (std::size_t t = 0; t < count; ++t) {
        if (!(in >> ranks[t])) return fail("bad shape");
        for (std::size_t d = 0; d < ranks[t]; ++d) {
            std::size_t dim = 0;
            if (!(in >> dim)) return fail("bad shape");
            sizes[t] *= dim;
        }
    }
    std::vector<std::vector<float>> params(count);
    std::vector<Optimizer> optimizers;
    for (std::size_t t = 0; t < count; ++t) {
        params[t].resize(sizes[t]);
        for (auto& v : params[t])
            if (!(in >> v)) return fail("bad initial values");
        std::string name = "t";  // (not "t" + to_string(t): GCC 12's false -Wrestrict)
        name += std::to_string(t);
        optimizers.emplace_back(c.for_tensor(name, ranks[t]), sizes[t]);
    }
    for (int s = 0; s < steps; ++s)
        for (std::size_t t = 0; t < count; ++t) {
            std::vector<float> grad(sizes[t]);
            for (auto& v : grad)
                if (!(in >> v)) return fail("bad gradient");
            optimizers[t].apply(params[t], grad, optimizers[t].config().weight_decay > 0.0f);
        }
    for (const auto& p : params)
        for (float v : p) std::printf("%.9g\n", static_cast<double>(v));
    return 0;
}
