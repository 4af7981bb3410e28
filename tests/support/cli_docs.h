#pragma once

// Checks of a program's generated manual page and shell completions
// (tools/clidoc) against the CLI11 App they were written from. The App is
// walked here with CLI11's own accessors, not tools/clidoc's, so that an
// option or subcommand the generator skips fails the check. Each check
// returns its problems, one line each: none when the output is good.

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace memd::test {

// One thing a user can type: an option spelling (-o, --output), a
// positional's name, or a subcommand, at `path` (the subcommands leading to
// it, space-separated: "" for the program itself, "put").
struct CliItem {
  enum class Kind { kOption, kPositional, kSubcommand };
  Kind kind;
  std::string path;
  std::string text;
};

// Everything shown in the App's help, subcommands at any depth.
std::vector<CliItem> CliItems(const CLI::App& app);

// The roff source: each subcommand has its section (.SS "prog path"), each
// option and positional is in its subcommand's section (the program's own
// before the first), and `groff -man -Tutf8 -ww` renders it without a
// warning.
std::vector<std::string> ManPageProblems(const CLI::App& app, const std::string& roff);

// The completions bash offers the words `words` (the last one being
// completed), with the generated script sourced: its function called as
// bash calls it, with COMP_WORDS and COMP_CWORD set. One entry per words.
std::vector<std::vector<std::string>> BashCompletions(
    const std::string& script, const std::string& program,
    const std::vector<std::vector<std::string>>& words);

// Bash: after each subcommand path, "-" completes to every option it
// accepts (its own; the program's own too where CLI11's fallthrough passes
// them up), and "" to every subcommand under it.
std::vector<std::string> BashCompletionProblems(const CLI::App& app,
                                                const std::string& script);

// Zsh: `zsh -n` accepts the script, and, run with _arguments and _describe
// replaced by stubs that print what they are given, each subcommand's
// function passes every option and positional of it, and its parent lists
// it. A missing zsh is one problem.
std::vector<std::string> ZshCompletionProblems(const CLI::App& app,
                                               const std::string& script);

}  // namespace memd::test
