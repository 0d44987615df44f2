#include "launcher/option_advice.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/suggest.h"
#include "workerd/evaluator.h"
#include "workerd/train_options.h"

namespace psrun::launcher {
namespace {

// "--name" of "--name=value"; empty when `arg` is not a long option.
std::string option_of(const std::string& arg) {
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) return {};
    return arg.substr(0, arg.find('='));
}

std::string usage_of(const CLI::App& subcommand) {
    const std::string name = subcommand.get_name();
    if (name == "run" || name == "local") return fmt::format("psrun {} [psrun options] -- [training options]", name);
    return fmt::format("psrun {} [options] (psrun {} --help)", name, name);
}

}  // namespace

std::vector<std::string> long_option_names(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::Option* opt : app.get_options()) {
        if (opt == app.get_help_ptr() || opt == app.get_help_all_ptr()) continue;
        for (const std::string& n : opt->get_lnames()) names.push_back("--" + n);
    }
    return names;
}

std::vector<std::string> training_option_names() {
    CLI::App workerd;
    worker::TrainOptions train;
    worker::EvaluatorOptions evaluation;
    worker::add_train_options(workerd, train);
    worker::add_evaluator_options(workerd, evaluation);
    auto names = long_option_names(workerd);
    names.push_back("--log-level");  // workerd's own (workerd/main.cpp); psrun's goes to psd
    return names;
}

std::optional<std::string> misplaced_option_message(const CLI::App& subcommand,
                                                    const std::vector<std::string>& training) {
    const auto psrun_options = long_option_names(subcommand);
    const auto training_options = training_option_names();
    auto contains = [](const std::vector<std::string>& v, const std::string& s) {
        return std::find(v.begin(), v.end(), s) != v.end();
    };
    for (const std::string& arg : training) {
        const std::string opt = option_of(arg);
        if (opt.empty() || !contains(psrun_options, opt) || contains(training_options, opt)) continue;
        return fmt::format("`{}` is a psrun option: put it before `--`: {}", opt, usage_of(subcommand));
    }
    return std::nullopt;
}

std::optional<std::string> unknown_option_message(const CLI::App& subcommand, const std::vector<std::string>& extras) {
    const auto it =
        std::find_if(extras.begin(), extras.end(), [](const std::string& a) { return a.rfind('-', 0) == 0; });
    if (it == extras.end()) return std::nullopt;
    const std::string opt = it->substr(0, it->find('='));
    const auto closest = closest_word(opt, long_option_names(subcommand));
    return fmt::format("unknown option `{}` for psrun {}{} Usage: {}", opt, subcommand.get_name(),
                       closest ? fmt::format("; did you mean `{}`?", *closest) : std::string("."),
                       usage_of(subcommand));
}

}  // namespace psrun::launcher
