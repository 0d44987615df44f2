// Test helper for onnx_pytorch_test.sh: exports every built-in model with seeded parameters and
// records what psrun's engine predicts for a batch of random images, so that Python can check
// the files with onnx.checker and OpenCV against the engine (layouts, padding, flattening).
// Usage: export_zoo OUT_DIR [MODEL.json...]  -> per built-in model and file NAME.onnx, NAME.input.f32 (raw NCHW float32
// batch of kBatch random images) and NAME.probs.f32 (the engine's class probabilities per image, as exp(-loss) of a
// one-image forward per class); names on stdout, one per line.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "common/rng.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/nn/zoo.h"
#include "workerd/onnx/onnx_model.h"

namespace {

constexpr int kBatch = 16;

template <class T>
void write_raw(const std::string& path, std::span<const T> values) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size_bytes()));
    if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
    using namespace psrun;
    if (argc < 2) {
        std::cerr << "usage: export_zoo OUT_DIR [MODEL.json...]\n";
        return kExitUsage;
    }
    const std::string dir = argv[1];
    std::vector<std::string> specs;
    for (const auto& builtin : nn::builtin_models()) specs.emplace_back(builtin.name);
    for (int i = 2; i < argc; ++i) specs.emplace_back(argv[i]);
    for (const auto& spec : specs) {
        auto model = nn::load_model(spec);
        if (!model) {
            std::cerr << model.error().message << "\n";
            return kExitFailure;
        }
        std::vector<float> params(static_cast<std::size_t>(model->parameter_count));
        nn::initialize_parameters(*model, 11, params);
        auto bytes = onnx_io::export_onnx(*model, params);
        if (!bytes) {
            std::cerr << bytes.error().message << "\n";
            return kExitFailure;
        }
        const std::string base = dir + "/" + model->name;
        std::ofstream(base + ".onnx", std::ios::binary) << *bytes;
        nn::NetworkOptions options;
        options.batch_size = 1;
        options.forward_only = true;
        auto network = nn::Network::create(*model, options, params, {});
        if (!network) {
            std::cerr << network.error().message << "\n";
            return kExitFailure;
        }
        nn::Network& net = **network;
        const std::size_t pixels = net.input().size();
        std::vector<float> images(pixels * kBatch);
        psrun::Rng rng(5);
        for (std::size_t i = 0; i < images.size(); ++i) {  // per image its own contrast
            const double scale = 0.2 + 2.0 * static_cast<double>((i / pixels) % 7) / 7.0;
            images[i] = static_cast<float>(rng.uniform() * scale);
        }
        std::vector<float> probs;
        for (int n = 0; n < kBatch; ++n) {
            std::copy_n(images.begin() + static_cast<std::ptrdiff_t>(pixels * static_cast<std::size_t>(n)), pixels,
                        net.input().begin());
            for (std::int64_t c = 0; c < model->classes; ++c) {
                net.labels()[0] = static_cast<std::int32_t>(c);
                probs.push_back(std::exp(-net.forward(false)));
            }
        }
        write_raw<float>(base + ".input.f32", images);
        write_raw<float>(base + ".probs.f32", probs);
        std::cout << model->name << std::endl;
    }
    return kExitOk;
}
