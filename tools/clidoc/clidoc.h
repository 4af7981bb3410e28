#pragma once

// Manual pages and shell completions written from a program's own CLI11
// App: the one its parse uses, walked for its subcommands, options, flags,
// positionals, descriptions, defaults, environment variables and choices.
// Nothing here names an option, so one added to the program is in its man
// page and completions at the next build (tools/clidoc/CMakeLists.txt).
//
// Choices, for the completions: an option's validator description in
// CLI11's form {a,b,c} (CLI::IsMember), or a type name that lists them,
// a|b|c (words of lowercase letters, digits, '_' and '-'; others such as N
// stand for a value and are left out). A type name or positional name
// containing FILE (or SRC/DST) completes file names, DIR directories.
//
// Plain functions of their arguments; thread-compatible.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"

namespace memd::clidoc {

// What a manual page says beyond the command line, which the App holds.
struct Page {
  std::string section;  // "1", "8".
  std::string source;   // .TH's footer: "memd 0.4.0".
  std::string summary;  // NAME: "memctl \- <summary>"; plain text.
  // DESCRIPTION's paragraphs (plain text, filled by roff); the App's own
  // footer (what --help prints last) follows them.
  std::vector<std::string> description;
  // Term and text pairs, plain text.
  std::vector<std::pair<std::string, std::string>> files;
  // Variables the program reads; those an option names (CLI11's envname)
  // are added, saying which option they stand for.
  std::vector<std::pair<std::string, std::string>> environment;
  std::vector<std::pair<std::string, std::string>> exit_status;
  std::vector<std::string> see_also;  // "memd(8)".
  // A line to add under an option (memd: the configuration key it also
  // is), or empty.
  std::function<std::string(const CLI::Option&)> option_note;
};

// The roff (man(7)) source of `app`'s manual page.
std::string ManPage(const CLI::App& app, const Page& page);

// A bash completion script for `app`: defines _<name> (name with '-' as
// '_') and registers it with `complete -F`. Needs bash 4, not the
// bash-completion package.
std::string BashCompletion(const CLI::App& app);

// A zsh completion script for `app` (#compdef <name>): _<name>, and
// _<name>_<subcommand> for each subcommand (any depth, '_' joined).
std::string ZshCompletion(const CLI::App& app);

// The helpers the generators and their tests walk the App with.
// Subcommands shown in help (named, not hidden), in declaration order.
std::vector<const CLI::App*> VisibleSubcommands(const CLI::App& app);
// Options shown in help (not hidden), positionals included, in
// declaration order.
std::vector<const CLI::Option*> VisibleOptions(const CLI::App& app);
// What an option can be given as on a command line: its -s and --long
// names, or its positional name.
std::vector<std::string> Spellings(const CLI::Option& option);
// The option's listed values (see above), or none.
std::vector<std::string> Choices(const CLI::Option& option);

}  // namespace memd::clidoc
