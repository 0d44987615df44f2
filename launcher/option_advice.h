// Messages for options in the wrong place or misspelled on psrun's command line: they name
// the right place and the closest known option (common/suggest.h) instead of CLI11's bare
// "The following arguments were not expected".
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace psrun::launcher {

// The long options ("--worker-timeout") of `app` itself, without --help.
std::vector<std::string> long_option_names(const CLI::App& app);

// The long options workerd takes as training options after "--": those of
// worker::add_train_options and worker::add_evaluator_options, and workerd's --log-level. The
// flags psrun derives itself (--ps, --key-file, --index, ...) are not among them.
std::vector<std::string> training_option_names();

// For `psrun run` and `psrun local`: the message for the first option among `training` (the
// arguments after "--", as "--name" or "--name=value") that is an option of `subcommand` and
// not a training option, e.g. "`--worker-timeout` is a psrun option: put it before `--`: psrun
// local [psrun options] -- [training options]"; nullopt when there is none.
std::optional<std::string> misplaced_option_message(const CLI::App& subcommand,
                                                    const std::vector<std::string>& training);

// The message for arguments `subcommand` did not expect (CLI11's ExtrasError): the first one
// that looks like an option, with the closest option of `subcommand` when one is close, and
// for run and local the usage; nullopt when no extra looks like an option.
std::optional<std::string> unknown_option_message(const CLI::App& subcommand, const std::vector<std::string>& extras);

}  // namespace psrun::launcher
