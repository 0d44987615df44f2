#include "launcher/cmd_model.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "common/result.h"
#include "workerd/nn/model_summary.h"
#include "workerd/nn/zoo.h"
#include "workerd/onnx/model_loader.h"

namespace psrun::launcher {

namespace {

struct ShowOptions {
    std::string model;
    bool json = false;
};

// "3,274,634".
std::string grouped(std::int64_t n) {
    const std::string digits = std::to_string(n);
    std::string out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') out += ',';
        out += digits[i];
    }
    return out;
}

std::string mflop(double flops) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", flops / 1e6);
    return text;
}

void print_table(const nn::ModelDescription& model) {
    std::cout << "model " << model.name;
    if (!model.description.empty()) std::cout << ": " << model.description;
    std::cout << "\ninput " << model.input.to_string() << " (CxHxW), " << model.classes
              << " classes, loss softmax cross-entropy (" << nn::to_string(model.reduction) << " over the batch)\n";
    std::printf("%5s  %-12s %-9s %-12s %12s %10s\n", "#", "name", "kind", "output", "parameters", "MFLOP");
    for (std::size_t i = 0; i < model.layers.size(); ++i) {
        const auto& layer = model.layers[i];
        std::printf("%5zu  %-12s %-9s %-12s %12s %10s\n", i, layer.name.c_str(),
                    std::string(nn::layer_kind_ops(layer.kind).name).c_str(), layer.output.to_string().c_str(),
                    grouped(layer.param_count).c_str(), mflop(layer.flops).c_str());
    }
    std::printf("total: %s parameters, %s bytes as f32, %s MFLOP per example (forward)\n",
                grouped(model.parameter_count).c_str(), grouped(model.parameter_count * 4).c_str(),
                mflop(model.flops).c_str());
    if (model.recipe) std::cout << "recipe: " << nn::to_string(*model.recipe) << "\n";
    std::cout << "architecture sha256: " << nn::architecture_hash(model) << std::endl;
}

}  // namespace

void add_model_command(CLI::App& app, int& exit_code) {
    CLI::App* model = app.add_subcommand("model", "inspect model descriptions (built-in, JSON or ONNX files)");
    model->require_subcommand(1);
    CLI::App* list = model->add_subcommand("list", "name the built-in models with one line each");
    list->callback([&exit_code] {
        for (const auto& builtin : nn::builtin_models()) {
            auto parsed = nn::load_model(builtin.name);
            std::printf("%-16s %s\n", std::string(builtin.name).c_str(),
                        parsed ? parsed->description.c_str() : parsed.error().message.c_str());
        }
        exit_code = kExitOk;
    });
    auto options = std::make_shared<ShowOptions>();
    CLI::App* show = model->add_subcommand(
        "show", "per layer: output shape, parameters, forward MFLOP per example; totals; recipe");
    show->add_option("model", options->model, "a built-in name (psrun model list), a FILE.json path or a FILE.onnx (imported)")->required();
    show->add_flag("--json", options->json, "print the summary as JSON");
    show->callback([options, &exit_code] {
        auto parsed = onnx_io::load_any_model(options->model);
        if (!parsed) {
            std::cerr << "psrun model show: " << parsed.error().message << "\n";
            exit_code = kExitUsage;
            return;
        }
        if (options->json) {
            std::cout << nn::summary_json(*parsed).dump(2) << std::endl;
        } else {
            print_table(*parsed);
        }
        exit_code = kExitOk;
    });
}

}  // namespace psrun::launcher
