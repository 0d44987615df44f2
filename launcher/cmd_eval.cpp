#include "launcher/cmd_eval.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checkpoint_store.h"
#include "common/metric_targets.h"
#include "common/result.h"
#include "common/utf8.h"
#include "launcher/confusion_plot.h"
#include "launcher/model_source.h"
#include "launcher/run_summary.h"
#include "launcher/table_column_options.h"
#include "workerd/class_names.h"
#include "workerd/classification_report.h"
#include "workerd/data/data_sources.h"
#include "workerd/data/dataset_fetch.h"
#include "workerd/data/idx_reader.h"
#include "workerd/data/split_files.h"
#include "workerd/datasets.h"
#include "workerd/eval_metrics.h"
#include "workerd/inference.h"
#include "workerd/input_columns.h"
#include "workerd/model_identity.h"
#include "workerd/nn/model_summary.h"
#include "workerd/table_split.h"

namespace psrun::launcher {
namespace {

struct EvalOptions {
    ModelSourceOptions source;
    std::string test_images;
    std::string test_labels;
    std::vector<std::string> test_inputs;  // --test-input NAME=FILE.npy: the model's inputs after the first
    std::string test_data;  // --test-data/--test-dir: an image folder, TFRecord files, a CSV or .npz table
    std::string inputs;
    std::string targets;
    std::string image_resize;  // empty: the model dir's record, else crop
    std::string dataset;       // empty: the recorded one, else mnist
    std::string data_dir;
    std::string output_dir;
    std::string target_accuracy;         // --target-accuracy: replaces the run's thresholds
    worker::TableColumnOptions columns;  // --input-columns ...: --test-data is a table feeding every input
};

// The labelled test split and how to name it in messages.
struct TestSet {
    worker::LabeledImages data;
    worker::SplitNames names;
    std::string description;  // "MNIST test split ($HOME/.cache/psrun/data/mnist)"
};

// --test-data: loaded into memory (a pass of psrun eval holds the whole split).
TestSet load_test_data(const EvalOptions& o, const worker::InferenceModel& model, const worker::DataRecord& record) {
    if (!o.test_images.empty() || !o.test_labels.empty() || !o.dataset.empty() || !o.data_dir.empty())
        throw UsageError("--test-data excludes --test-images/--test-labels and --dataset/--data-dir: give one");
    worker::DataOptions d;
    d.test_data = o.test_data;
    d.inputs = worker::split_list(o.inputs);
    d.targets = worker::split_list(o.targets);
    d.stream = worker::StreamMode::kOff;
    const std::string mode = !o.image_resize.empty()        ? o.image_resize
                             : !record.image_resize.empty() ? record.image_resize
                                                            : std::string("crop");
    auto resize = worker::parse_resize_mode(mode);
    if (!resize) throw UsageError(resize.error().message);
    d.resize = *resize;
    const worker::ModelInput input = worker::model_input(model.model, model.raw_inputs());
    if (input.raw_ids)
        throw UsageError("--raw-ids: the model's first input " + model.model.input_name() +
                         " takes raw ids, read from a .npy file (--test-images IDS.npy --test-labels F) or a CSV/TSV "
                         "table (--input-columns), not --test-data " +
                         o.test_data);
    auto split = worker::load_test_split(d, input, {});
    if (!split) throw UsageError(split.error().message);
    TestSet set;
    set.data = std::move(*split->memory);
    worker::conform_to_model(set.data, input);
    set.names = {"test data " + o.test_data, "test data " + o.test_data};
    set.description = split->description;
    if (!split->class_names.empty() && !record.classes.empty() && split->class_names != record.classes)
        throw UsageError("test data " + o.test_data + ": its classes are not the " +
                         std::to_string(record.classes.size()) + " the model was trained on (" + o.source.model_dir +
                         "/classes.json)");
    return set;
}

// --test-data F.csv with --input-columns: the table feeds every input, hashed as training hashed it.
TestSet load_test_table(const EvalOptions& o, const worker::InferenceModel& model) {
    auto spec = worker::parse_table_columns(o.columns);
    if (!spec) throw UsageError(spec.error().message);
    if (o.test_data.empty())
        throw UsageError("--input-columns reads the model's inputs from a CSV/TSV table: give --test-data F.csv");
    if (!o.test_images.empty() || !o.test_labels.empty() || !o.dataset.empty() || !o.data_dir.empty() ||
        !o.test_inputs.empty())
        throw UsageError(
            "--input-columns reads every input from the --test-data table: drop --test-images/--test-labels, "
            "--dataset/--data-dir and --test-input");
    if (!o.inputs.empty())
        throw UsageError(
            "--inputs and --input-columns exclude each other: name each input's columns with "
            "--input-columns NAME=COL,...");
    auto table =
        worker::load_table_split(o.test_data, *spec, model.model, worker::split_list(o.targets), model.raw_inputs());
    if (!table) throw UsageError(table.error().message);
    TestSet set;
    set.data = std::move(table->data);
    set.names = {"test data " + o.test_data, "test data " + o.test_data};
    set.description = table->description;
    return set;
}

TestSet load_test_set(const EvalOptions& o, const worker::InferenceModel& model, const worker::DataRecord& record) {
    if (o.columns.any()) return load_test_table(o, model);
    if (!o.test_data.empty()) return load_test_data(o, model, record);
    TestSet set;
    if (!o.test_images.empty() || !o.test_labels.empty()) {
        // A model whose loss reads no labels (a regression's targets are a column) needs none.
        const bool labels_needed = model.model.labels_used();
        if (o.test_images.empty() || (o.test_labels.empty() && labels_needed))
            throw UsageError("give both --test-images F and --test-labels F (IDX or .npy files)");
        if (!o.dataset.empty() || !o.data_dir.empty())
            throw UsageError(
                "--test-images/--test-labels and --dataset/--data-dir exclude each other: give one or the other");
        const worker::SplitFiles files{o.test_images, o.test_labels};
        // Read as training read them: images, or for a model of token ids, feature vectors or
        // target vectors, .npy rows of those (a sparse click model's int64 ids).
        const worker::ModelInput input = worker::model_input(model.model, model.raw_inputs());
        auto split = worker::load_split_files("test", files, worker::ImageLayout::kAuto, &input);
        if (!split) throw UsageError(split.error().message);
        set.data = std::move(*split);
        set.names = worker::split_names("test", files);
        set.description = "test images " + o.test_images;
        return set;
    }
    std::string dataset = o.dataset.empty() ? model.dataset : o.dataset;
    if (dataset == "files")
        throw UsageError(model.source +
                         " was trained on files (--train-images ...), not a dataset dir: give "
                         "--test-images F --test-labels F");
    if (dataset.empty()) dataset = "mnist";
    auto kind = worker::parse_dataset_kind(dataset);
    if (!kind) throw UsageError(kind.error().message);
    const std::string dir = o.data_dir.empty() ? worker::default_data_dir(*kind) : o.data_dir;
    auto split = worker::load_split(dir, "t10k");
    if (!split)
        throw UsageError(split.error().message + " (run `psrun data fetch --dataset " + dataset +
                         (o.data_dir.empty() ? "" : " --data-dir " + o.data_dir) +
                         "` first, or give --test-images F --test-labels F)");
    set.data = std::move(*split);
    set.names = {"test images in " + dir, "test labels in " + dir};
    set.description = std::string(worker::to_string(*kind)) + " test split (" + dir + ")";
    return set;
}

// eval.json's fields naming what was evaluated, on what, and how long it took.
void add_identity(nlohmann::json& summary, const worker::InferenceModel& model, const TestSet& test, double seconds) {
    summary["model"] = model.model.name;
    summary["model_hash"] = nn::architecture_hash(model.model);
    summary["source"] = model.source;
    summary["step"] = model.step;
    summary["test_set"] = test.description;
    summary["eval_seconds"] = seconds;
}

// Regression (MSE, MAE) and multi-label (exact match, F1 per label) models: their figures, on
// stdout and in eval.json; no confusion matrix.
void report_targets(const worker::InferenceModel& model, const TestSet& test, const std::vector<float>& outputs,
                    double seconds, const std::string& out_dir) {
    worker::EvalAccumulator sums(model.model.loss, model.model.classes, true);
    sums.add(outputs, {}, test.data.targets, test.data.size());
    const worker::EvalMetrics m = sums.result();
    std::cout << "model " << worker::describe_model(model.model) << " from " << model.source << "\n"
              << test.data.size() << " examples of the " << test.description << ", evaluated in "
              << fmt::format("{:.2f}", seconds) << " s\n"
              << m.text() << "\n";
    for (std::size_t c = 0; c < m.f1.size(); ++c) std::cout << fmt::format("label {}: F1 {:.3f}\n", c, m.f1[c]);
    nlohmann::json summary = m.json();
    summary["examples"] = m.examples;
    add_identity(summary, model, test, seconds);
    const std::string json_path = std::filesystem::absolute(out_dir).string() + "/eval.json";
    if (auto wrote = write_file_atomically(json_path, json_text(summary, 2) + "\n"); !wrote)
        throw std::runtime_error(wrote.error().message);
    std::cout << "wrote " << out_dir << "/eval.json" << std::endl;
}

void print_heads(const worker::EvalMetrics& figures) {
    for (const auto& h : figures.heads) std::cout << "head " << h.text() << "\n";
}

// A graph loss without a softmax head on the data's labels (only sigmoid heads, or heads on
// columns): each head's figures, on stdout and in eval.json; no confusion matrix.
void report_heads(const worker::InferenceModel& model, const TestSet& test, const worker::EvalMetrics& figures,
                  double seconds, const std::string& out_dir) {
    std::cout << "model " << worker::describe_model(model.model) << " from " << model.source << "\n"
              << test.data.size() << " examples of the " << test.description << ", evaluated in "
              << fmt::format("{:.2f}", seconds) << " s\n";
    print_heads(figures);
    nlohmann::json summary = figures.json();
    summary.erase("test_loss");  // not measured here (the run's metrics.jsonl has it)
    summary["examples"] = test.data.size();
    add_identity(summary, model, test, seconds);
    const std::string json_path = std::filesystem::absolute(out_dir).string() + "/eval.json";
    if (auto wrote = write_file_atomically(json_path, json_text(summary, 2) + "\n"); !wrote)
        throw std::runtime_error(wrote.error().message);
    std::cout << "wrote " << out_dir << "/eval.json" << std::endl;
}

// Every head's figures (a graph loss's model.heads), each against its target input: the data's
// labels or targets for the label input, else its --test-input column.
worker::EvalMetrics head_metrics(const worker::InferenceModel& model, const TestSet& test,
                                 const std::vector<worker::HeadPrediction>& predictions) {
    worker::EvalAccumulator sums(nn::LossKind::kGraph, 1, true);
    const auto& m = model.model;
    sums.set_heads(m.heads);
    const std::size_t n = test.data.size();
    for (std::size_t k = 0; k < m.heads.size(); ++k) {
        const nn::Head& h = m.heads[k];
        const int input = m.input_index(h.target);
        std::span<const std::int32_t> labels;
        std::span<const float> targets;
        if (input == m.label_input) {
            labels = test.data.labels;
            targets = test.data.targets;
        } else {
            for (const auto& column : test.data.columns)
                if (column.name == h.target) {
                    labels = column.i32;
                    targets = column.f32;
                }
        }
        if ((h.kind == nn::HeadKind::kSoftmax && labels.size() < n * static_cast<std::size_t>(h.positions())) ||
            (h.kind != nn::HeadKind::kSoftmax && targets.size() < n * static_cast<std::size_t>(h.width)))
            throw std::logic_error("psrun eval: no test values for head " + h.value + "'s targets " + h.target);
        sums.add_head(k, predictions[k].probabilities, labels, targets, n);
    }
    return sums.result();
}

void run_eval(const EvalOptions& o) {
    std::vector<double> given;
    if (!o.target_accuracy.empty()) {
        auto parsed = parse_target_accuracy(o.target_accuracy);
        if (!parsed) throw UsageError(parsed.error().message);
        given = *parsed;
        if (o.source.model_dir.empty())
            throw UsageError("--target-accuracy needs --model-dir: the times come from the run's summary.json");
    }
    const worker::InferenceModel model = load_model_source(o.source);
    const bool graph_heads = model.model.loss == nn::LossKind::kGraph && !model.model.heads.empty();
    if (model.model.loss == nn::LossKind::kGraph && model.model.heads.empty())
        throw UsageError("model " + model.model.name +
                         " ends in its own loss and has no head (scores a softmax_cross_entropy_loss or nll_loss reads "
                         "against int labels, logits a binary cross-entropy reads against float targets, or "
                         "predictions a regression loss subtracts float targets from; name them "
                         "in the loss's \"heads\"): psrun eval has nothing to score; its test loss is "
                         "in the run's metrics.jsonl and summary.json");
    worker::DataRecord record;
    if (!o.source.model_dir.empty()) {
        auto read = worker::read_data_record(o.source.model_dir);
        if (!read) throw UsageError(read.error().message);
        record = std::move(*read);
    }
    TestSet test = load_test_set(o, model, record);
    if (!o.columns.any()) {  // a table fed every input itself
        auto columns = worker::load_input_columns(model.model, o.test_inputs, "--test-input", test.data.size(),
                                                  test.names.labels, model.raw_inputs());
        if (!columns) throw UsageError(columns.error().message);
        test.data.columns = std::move(*columns);
    }
    apply_normalization(o.source, test.data);
    if (auto fits =
            worker::check_fits_model(test.data, test.names, worker::model_input(model.model, model.raw_inputs()));
        !fits)
        throw UsageError(fits.error().message);
    const std::string out_dir = o.output_dir.empty() ? default_output_dir(o.source) : o.output_dir;
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) throw UsageError("-o " + out_dir + ": cannot create it: " + ec.message());

    const auto t0 = std::chrono::steady_clock::now();
    std::optional<worker::EvalMetrics> heads;  // a graph loss's heads, each scored by its kind
    Result<std::vector<float>> probs{std::vector<float>()};
    if (graph_heads) {
        auto predictions = worker::predict_heads(model, test.data, o.source.batch_size);
        if (!predictions) throw std::runtime_error(predictions.error().message);
        heads = head_metrics(model, test, *predictions);
        const int primary = model.model.head_index(model.model.head);
        if (primary >= 0) probs = std::move((*predictions)[static_cast<std::size_t>(primary)].probabilities);
    } else {
        probs = worker::predict_probabilities(model, test.data, o.source.batch_size);
        if (!probs) throw std::runtime_error(probs.error().message);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (heads && model.model.head.empty()) return report_heads(model, test, *heads, seconds, out_dir);
    if (!model.model.classification()) return report_targets(model, test, *probs, seconds, out_dir);
    const auto predicted = worker::arg_max(*probs, model.model.classes);
    const auto report = worker::make_report(test.data.labels, predicted, static_cast<int>(model.model.classes));

    std::cout << "model " << worker::describe_model(model.model) << " from " << model.source << "\n"
              << test.data.size() << " images of the " << test.description << ", evaluated in "
              << fmt::format("{:.2f}", seconds) << " s\n"
              << fmt::format("accuracy {:.2f}% ({} of {})\n\n", 100 * report.accuracy(), report.correct, report.total)
              << worker::report_table(report, record.classes)
              << "\nconfusion matrix (rows: true class, columns: predicted class)\n"
              << worker::confusion_text(report) << "\n";
    if (heads) print_heads(*heads);
    // How long the training run took to its targets, from the model dir's summary.json.
    std::optional<RunTargets> targets;
    if (!o.source.model_dir.empty()) targets = read_run_targets(o.source.model_dir, given);
    if (targets) std::cout << "training run: " << targets->line << "\n";
    else if (!given.empty())
        std::cout << "training run: no evaluations in " << o.source.model_dir
                  << "/summary.json, so no time to --target-accuracy\n";

    nlohmann::json summary = worker::report_json(report);
    if (heads)
        for (const auto& h : heads->heads) h.add_json(summary);
    add_identity(summary, model, test, seconds);
    if (!record.classes.empty()) summary["class_names"] = record.classes;
    if (targets) summary["training_targets"] = targets->json;
    const std::string json_path = std::filesystem::absolute(out_dir).string() + "/eval.json";
    if (auto wrote = write_file_atomically(json_path, json_text(summary, 2) + "\n"); !wrote)
        throw std::runtime_error(wrote.error().message);
    const std::string png_path = out_dir + "/confusion.png";
    const std::string title = fmt::format("{}{}: accuracy {:.2f}% on {} images", model.model.name,
                                          model.step >= 0 ? fmt::format(" (step {})", model.step) : std::string(),
                                          100 * report.accuracy(), report.total);
    if (auto plot = plot_confusion(report, title, png_path); !plot)
        std::cerr << "psrun eval: no confusion.png: " << plot.error().message << "\n";
    else std::cout << "wrote " << png_path << "\n";
    std::cout << "wrote " << out_dir << "/eval.json" << std::endl;
}

}  // namespace

void add_eval_command(CLI::App& app, int& exit_code) {
    auto o = std::make_shared<EvalOptions>();
    CLI::App* cmd = app.add_subcommand(
        "eval", "accuracy, per-class precision/recall and the confusion matrix of a trained model on a test set");
    add_model_source_options(*cmd, o->source);
    cmd->add_option("--test-images", o->test_images, "test images (IDX or .npy) instead of the dataset's test split");
    cmd->add_option("--test-labels", o->test_labels, "their labels (IDX or .npy)");
    cmd->add_option("--test-input", o->test_inputs,
                    "NAME=FILE.npy: a model with several inputs reads its input NAME (one after the first) from "
                    "FILE.npy, one row per test example; repeat per input")
        ->expected(1)
        ->take_all();
    cmd->add_option("--test-data,--test-dir", o->test_data,
                    "test data as training's --test-data: an image folder, TFRecord files, a CSV or .npz table");
    add_table_column_options(*cmd, o->columns, "--test-data");
    cmd->add_option("--inputs", o->inputs, "with --test-data: input features by name (as training's --inputs)");
    cmd->add_option("--targets", o->targets, "with --test-data: target features by name (as training's --targets)");
    cmd->add_option("--image-resize", o->image_resize,
                    "with --test-data: crop, pad or stretch (default: what training recorded, else crop)");
    cmd->add_option("--dataset", o->dataset,
                    "mnist or fashion-mnist (default: what the run recorded in summary.json, else mnist)");
    cmd->add_option("--data-dir", o->data_dir, "where the dataset's files are (default: psrun data fetch's)");
    cmd->add_option("--target-accuracy", o->target_accuracy,
                    "with --model-dir: the training run's time to these test accuracies (e.g. 99,99.2) instead of "
                    "its own targets");
    cmd->add_option("-o,--output-dir", o->output_dir,
                    "where confusion.png and eval.json go (default: the model dir, or the ONNX file's)");
    cmd->callback([o, &exit_code] {
        run_eval(*o);
        exit_code = kExitOk;
    });
}

}  // namespace psrun::launcher
