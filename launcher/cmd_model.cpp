#include "launcher/cmd_model.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/option_checks.h"
#include "common/result.h"
#include "common/utf8.h"
#include "launcher/cmd_model_check.h"
#include "launcher/cmd_model_freeze.h"
#include "launcher/model_memory.h"
#include "launcher/model_placement.h"
#include "workerd/nn/model_summary.h"
#include "workerd/nn/zoo.h"
#include "workerd/onnx/model_loader.h"

namespace psrun::launcher {

namespace {

struct ShowOptions {
    std::string model;
    bool json = false;
    std::uint32_t ps = 0;
    std::vector<std::string> sparse;
    std::int64_t batch = 128;  // for the training memory
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

std::string loss_text(const nn::ModelDescription& model) {
    switch (model.loss) {
        case nn::LossKind::kSoftmaxCrossEntropy:
            return std::to_string(model.classes) + " classes, loss softmax cross-entropy";
        case nn::LossKind::kMeanSquaredError:
            return std::to_string(model.classes) + " targets, loss mean squared error";
        case nn::LossKind::kSigmoidCrossEntropy:
            return std::to_string(model.classes) + " labels, loss sigmoid cross-entropy";
        case nn::LossKind::kGraph: {
            std::string labels = model.label_input < 0
                                     ? std::string("no label input")
                                     : "labels " + model.inputs[static_cast<std::size_t>(model.label_input)].name;
            if (!model.head.empty())
                labels += ", " + std::to_string(model.classes) + " classes (head " + model.head + ")";
            if (model.heads.size() > 1 || (model.heads.size() == 1 && model.head.empty())) {
                labels += "; heads";
                for (const auto& h : model.heads) {
                    labels += std::string(&h == &model.heads.front() ? " " : ", ") + h.value + " " +
                              nn::to_string(h.kind) + " x" + std::to_string(h.width);
                    if (!h.spatial.empty()) labels += " per position of";
                    for (std::size_t i = 0; i < h.spatial.size(); ++i)
                        labels += (i ? "x" : " ") + std::to_string(h.spatial[i]);
                    labels += " on " + h.target;
                }
            }
            return "loss in the graph (" + labels + ")";
        }
    }
    return "";
}

void print_table(const nn::ModelDescription& model) {
    std::cout << "model " << model.name;
    if (!model.description.empty()) std::cout << ": " << model.description;
    if (model.multi_input()) {
        std::cout << "\ninputs";
        for (const auto& in : model.inputs) {
            const bool image = in.info.type == nn::ElementType::kFloat && in.info.rank() == 4;
            std::cout << (&in == &model.inputs.front() ? " " : ", ") << in.name << " " << nn::shape_text(in.info.dims)
                      << (image ? " (CxHxW)" : "") << " " << nn::to_string(in.info.type);
        }
        std::cout << "; ";
    } else {
        const auto image = model.image_input();
        std::cout << "\ninput " << nn::shape_text(model.input().dims) << (image ? " (CxHxW)" : "") << " "
                  << nn::to_string(model.input().type) << ", ";
    }
    std::cout << loss_text(model);
    if (model.loss != nn::LossKind::kGraph) std::cout << " (" << nn::to_string(model.reduction) << " over the batch)";
    std::cout << "\n";
    std::size_t width = 12, kind_width = 9;
    for (const auto& node : model.nodes) {
        width = std::max(width, node.name.size());
        kind_width = std::max(kind_width, node.op.size());
    }
    std::printf("%5s  %-*s %-*s %-14s %12s %10s  %s\n", "#", static_cast<int>(width), "name",
                static_cast<int>(kind_width), "kind", "output", "parameters", "MFLOP", "inputs");
    std::int64_t state = 0;
    for (std::size_t i = 0; i < model.nodes.size(); ++i) {
        const auto& node = model.nodes[i];
        const std::string previous = i == 0 ? model.input_name() : model.nodes[i - 1].outputs.front();
        std::string inputs;
        if (!(node.data_inputs == 1 && node.inputs[0] == previous))
            for (std::size_t k = 0; k < node.data_inputs; ++k) inputs += (k ? ", " : "") + node.inputs[k];
        std::int64_t node_state = 0;
        for (const auto& t : model.tensors)
            if (t.owner == node.name && t.cls == nn::TensorClass::kState) node_state += t.size;
        state += node_state;
        std::string params = grouped(node.param_count - node_state);
        if (node_state > 0) params += " +" + grouped(node_state) + " state";
        std::printf("%5zu  %-*s %-*s %-14s %12s %10s  %s\n", i, static_cast<int>(width), node.name.c_str(),
                    static_cast<int>(kind_width), node.op.c_str(),
                    nn::shape_text(node.output_info.front().dims).c_str(), params.c_str(), mflop(node.flops).c_str(),
                    inputs.c_str());
    }
    std::printf("total: %s parameters, %s bytes as f32, %s MFLOP per example (forward)\n",
                grouped(model.parameter_count - state).c_str(), grouped(model.parameter_count * 4).c_str(),
                mflop(model.flops).c_str());
    if (state > 0)
        std::printf("state: %s values (batch statistics and frozen tensors, not trained by the optimizer)\n",
                    grouped(state).c_str());
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
    add_model_check_command(*model, exit_code);
    add_model_freeze_command(*model, exit_code);
    auto options = std::make_shared<ShowOptions>();
    CLI::App* show =
        model->add_subcommand("show", "per layer: output shape, parameters, forward MFLOP per example; totals; recipe");
    show->add_option("model", options->model,
                     "a built-in name (psrun model list), a FILE.json path or a FILE.onnx (imported)")
        ->required();
    show->add_flag("--json", options->json, "print the summary as JSON");
    show->add_option("--batch-size", options->batch,
                     "the batch of the training memory figure (the engine's activations, gradients and temporaries)")
        ->check(integer_in(1, 4096));
    show->add_option("--ps", options->ps,
                     "also print where each tensor lives with K psd shards, and each shard's bytes")
        ->check(integer_in(1, kMaxTasks));
    show->add_option("--sparse-embedding", options->sparse,
                     "with --ps: this embedding's table is sparse (repeat it, or a,b; docs/sparse.md)")
        ->delimiter(',');
    show->callback([options, &exit_code] {
        auto parsed = onnx_io::load_any_model(options->model);
        if (!parsed) {
            std::cerr << "psrun model show: " << parsed.error().message << "\n";
            exit_code = kExitUsage;
            return;
        }
        for (const auto& warning : parsed->import_warnings)
            std::cerr << "psrun model show: warning: " << warning << "\n";
        // The engine's training memory; a model the engine cannot build still shows (exit 0).
        const auto memory = training_memory(*parsed, options->batch);
        if (options->json) {
            auto summary = nn::summary_json(*parsed);
            if (!parsed->import_warnings.empty()) summary["import_warnings"] = parsed->import_warnings;
            summary["training_memory"] = memory ? training_memory_json(*memory, options->batch)
                                                : nlohmann::json{{"error", memory.error().message}};
            std::cout << json_text(summary, 2) << std::endl;
        } else {
            print_table(*parsed);
            std::cout << (memory ? training_memory_text(*memory, options->batch)
                                 : "training memory: not measured: " + memory.error().message)
                      << std::endl;
            if (options->ps > 0) {
                try {
                    print_placement(*parsed, options->ps, options->sparse);
                } catch (const UsageError& e) {
                    std::cerr << "psrun model show: " << e.what() << "\n";
                    exit_code = kExitUsage;
                    return;
                }
            }
        }
        exit_code = kExitOk;
    });
}

}  // namespace psrun::launcher
