#include "tools/clidoc/clidoc.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace memd::clidoc {
namespace {

// ---------------------------------------------------------------- the App

// A flag takes no value: CLI11's add_flag sets expected(0).
bool IsFlag(const CLI::Option& option) {
  return !option.get_positional() &&
         (option.get_expected_max() == 0 || option.get_type_size_max() == 0);
}

// The option takes a value, but may be given without one (--watch [SECONDS]).
bool ValueIsOptional(const CLI::Option& option) {
  return !IsFlag(option) && option.get_expected_min() == 0;
}

bool Repeats(const CLI::Option& option) { return option.get_expected_max() > 1; }

// The App's name, or the program's for the root.
std::string NameOf(const CLI::App& app) { return app.get_name(); }

// What the user types to reach `app`: "memctl put".
std::string CommandPath(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* at = &app; at != nullptr; at = at->get_parent()) {
    names.push_back(at->get_name());
  }
  std::reverse(names.begin(), names.end());
  return absl::StrJoin(names, " ");
}

// Options that `app` accepts: its own, and (fallthrough) its parents'.
std::vector<const CLI::Option*> AcceptedOptions(const CLI::App& app) {
  std::vector<const CLI::Option*> options;
  for (const CLI::Option* option : VisibleOptions(app)) {
    if (!option->get_positional()) options.push_back(option);
  }
  for (const CLI::App* at = &app; at->get_parent() != nullptr && at->get_fallthrough();
       at = at->get_parent()) {
    for (const CLI::Option* option : VisibleOptions(*at->get_parent())) {
      if (option->get_positional()) continue;
      // A name the subcommand has itself (--json, --help) is the subcommand's.
      bool shadowed = false;
      for (const CLI::Option* own : options) {
        for (const std::string& spelling : Spellings(*option)) {
          for (const std::string& own_spelling : Spellings(*own)) {
            shadowed = shadowed || spelling == own_spelling;
          }
        }
      }
      if (!shadowed) options.push_back(option);
    }
  }
  return options;
}

std::vector<const CLI::Option*> Positionals(const CLI::App& app) {
  std::vector<const CLI::Option*> positionals;
  for (const CLI::Option* option : VisibleOptions(app)) {
    if (option->get_positional()) positionals.push_back(option);
  }
  return positionals;
}

// What CLI11 appends to an option's type name, ":" and a description, for
// each of its validators (IsMember: "{a,b,c}", PositiveNumber: "POSITIVE").
std::vector<std::string> ValidatorDescriptions(const CLI::Option& option) {
  // CLI11 2.1's get_validator(int) is not const; it changes nothing.
  auto& readable = const_cast<CLI::Option&>(option);
  std::vector<std::string> descriptions;
  for (int index = 0;; ++index) {
    try {
      descriptions.push_back(readable.get_validator(index)->get_description());
    } catch (const CLI::OptionNotFound&) {
      return descriptions;
    }
  }
}

// The type name the program gave, without the validators' descriptions.
std::string TypeName(const CLI::Option& option) {
  std::string name = option.get_type_name();
  std::vector<std::string> descriptions = ValidatorDescriptions(option);
  for (auto description = descriptions.rbegin(); description != descriptions.rend();
       ++description) {
    if (description->empty()) continue;
    absl::string_view rest = name;
    if (absl::ConsumeSuffix(&rest, ":" + *description)) name = std::string(rest);
  }
  return name;
}

// The type name as the user reads it, or none for a flag.
std::string ValueName(const CLI::Option& option) {
  if (IsFlag(option)) return "";
  std::string name = TypeName(option);
  name = std::string(absl::StripPrefix(absl::StripSuffix(name, "]"), "["));
  if (name.empty() && option.get_positional()) name = option.get_name(true);
  return name;
}

enum class Completes { kNothing, kFiles, kDirectories };

Completes WhatCompletes(const CLI::Option& option) {
  std::string name = absl::AsciiStrToUpper(ValueName(option));
  if (option.get_positional()) name += " " + absl::AsciiStrToUpper(option.get_name(true));
  if (absl::StrContains(name, "DIR")) return Completes::kDirectories;
  if (absl::StrContains(name, "FILE") || absl::StrContains(name, "SRC") ||
      absl::StrContains(name, "DST") || absl::StrContains(name, "PATH")) {
    return Completes::kFiles;
  }
  return Completes::kNothing;
}

// Single-line text: CLI11 descriptions may wrap with '\n'.
std::string OneLine(const std::string& text) {
  std::string line = absl::StrReplaceAll(text, {{"\n", " "}});
  return std::string(absl::StripAsciiWhitespace(line));
}

// ------------------------------------------------------------------ roff

// Text for a line of roff: backslashes and hyphens escaped (a '-' in an
// option name is a minus sign to man, so that it can be copied), and a line
// that would start with a control character made text.
std::string Roff(const std::string& text) {
  std::string escaped = absl::StrReplaceAll(text, {{"\\", "\\e"}, {"-", "\\-"}});
  std::vector<std::string> lines = absl::StrSplit(escaped, '\n');
  for (std::string& line : lines) {
    if (!line.empty() && (line[0] == '.' || line[0] == '\'')) line.insert(0, "\\&");
  }
  return absl::StrJoin(lines, "\n");
}

// For a quoted macro argument (.SS "..."): a double quote is \(dq.
std::string RoffQuoted(const std::string& text) {
  return absl::StrReplaceAll(Roff(text), {{"\"", "\\(dq"}});
}

std::string Bold(const std::string& text) { return absl::StrCat("\\fB", Roff(text), "\\fR"); }
std::string Italic(const std::string& text) {
  return absl::StrCat("\\fI", Roff(text), "\\fR");
}

// Help text as CLI11 prints it (a footer): lines of prose are filled into
// paragraphs (a blank line ends one), and indented lines (examples, tables)
// are kept as they are, indented.
std::string TextBlock(const std::string& text) {
  std::ostringstream out;
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  enum { kNone, kProse, kVerbatim } mode = kNone;
  bool paragraph_ended = true;
  for (const std::string& line : lines) {
    if (absl::StripAsciiWhitespace(line).empty()) {
      if (mode == kVerbatim) out << ".fi\n.RE\n";
      mode = kNone;
      paragraph_ended = true;
      continue;
    }
    if (line[0] == ' ') {
      if (mode != kVerbatim) {
        if (mode == kNone && paragraph_ended) out << ".PP\n";
        out << ".RS 2\n.nf\n";
        mode = kVerbatim;
      }
      // The help's two-space indent is .RS's.
      out << Roff(std::string(absl::StripPrefix(line, "  "))) << "\n";
      continue;
    }
    if (mode == kVerbatim) {
      out << ".fi\n.RE\n";
      paragraph_ended = true;
    }
    if (mode != kProse && paragraph_ended) out << ".PP\n";
    mode = kProse;
    paragraph_ended = false;
    out << Roff(line) << "\n";
  }
  if (mode == kVerbatim) out << ".fi\n.RE\n";
  return out.str();
}

std::string OptionTerm(const CLI::Option& option) {
  if (option.get_positional()) return Italic(option.get_name(true));
  std::vector<std::string> names;
  for (const std::string& spelling : Spellings(option)) names.push_back(Bold(spelling));
  std::string term = absl::StrJoin(names, ", ");
  std::string value = ValueName(option);
  if (!value.empty()) {
    absl::StrAppend(&term, " ", ValueIsOptional(option) ? "[" : "", Italic(value),
                    ValueIsOptional(option) ? "]" : "");
  }
  return term;
}

std::string OptionEntry(const CLI::Option& option, const Page& page) {
  std::string entry = absl::StrCat(".TP\n", OptionTerm(option), "\n",
                                    Roff(OneLine(option.get_description())), "\n");
  std::vector<std::string> choices = Choices(option);
  // A type name a|b|c lists them already.
  if (!choices.empty() && !absl::StrContains(ValueName(option), '|')) {
    absl::StrAppend(&entry, ".br\nOne of: ", Roff(absl::StrJoin(choices, ", ")), ".\n");
  }
  if (option.get_positional() && option.get_required()) {
    absl::StrAppend(&entry, ".br\nRequired.\n");
  }
  if (!option.get_default_str().empty()) {
    absl::StrAppend(&entry, ".br\nDefault: ", Bold(option.get_default_str()), ".\n");
  }
  if (!option.get_envname().empty()) {
    absl::StrAppend(&entry, ".br\nDefault from the environment: ",
                    Bold(option.get_envname()), ".\n");
  }
  if (page.option_note) {
    std::string note = page.option_note(option);
    if (!note.empty()) absl::StrAppend(&entry, ".br\n", Roff(note), "\n");
  }
  return entry;
}

// "[OPTIONS] NAME [FILE]" for a synopsis, as roff.
std::string Usage(const CLI::App& app) {
  std::string usage;
  if (!AcceptedOptions(app).empty()) usage = "[\\fIOPTIONS\\fR]";
  for (const CLI::Option* positional : Positionals(app)) {
    std::string name = Italic(positional->get_name(true));
    if (Repeats(*positional)) name += "\\ .\\|.\\|.";
    absl::StrAppend(&usage, usage.empty() ? "" : " ",
                    positional->get_required() ? name : absl::StrCat("[", name, "]"));
  }
  if (!VisibleSubcommands(app).empty()) {
    absl::StrAppend(&usage, usage.empty() ? "" : " ",
                    "\\fICOMMAND\\fR [\\fICOMMAND OPTIONS\\fR]");
  }
  return usage;
}

void AppendCommands(const CLI::App& app, const Page& page, std::ostringstream& out) {
  for (const CLI::App* sub : VisibleSubcommands(app)) {
    out << ".SS \"" << RoffQuoted(CommandPath(*sub)) << "\"\n";
    out << ".B " << Roff(CommandPath(*sub)) << "\n" << Usage(*sub) << "\n";
    out << ".PP\n" << Roff(OneLine(sub->get_description())) << "\n";
    if (!sub->get_footer().empty()) out << TextBlock(sub->get_footer());
    std::vector<const CLI::Option*> own = VisibleOptions(*sub);
    if (!own.empty()) out << ".PP\nOptions of " << Bold(CommandPath(*sub)) << ":\n";
    for (const CLI::Option* option : own) out << OptionEntry(*option, page);
    AppendCommands(*sub, page, out);
  }
}

std::string DefinitionList(const std::vector<std::pair<std::string, std::string>>& items,
                           bool bold_terms) {
  std::string list;
  for (const auto& [term, text] : items) {
    absl::StrAppend(&list, ".TP\n", bold_terms ? Bold(term) : Roff(term), "\n", Roff(text),
                    "\n");
  }
  return list;
}

// Every option of the App and its subcommands with an environment variable.
void CollectEnvironment(const CLI::App& app,
                        std::vector<std::pair<std::string, std::string>>& environment) {
  for (const CLI::Option* option : VisibleOptions(app)) {
    if (option->get_envname().empty()) continue;
    std::string what = absl::StrCat("The default of ", CommandPath(app), " ",
                                     Spellings(*option).back(), ".");
    auto known =
        std::find_if(environment.begin(), environment.end(),
                     [&](const auto& item) { return item.first == option->get_envname(); });
    if (known == environment.end()) {
      environment.emplace_back(option->get_envname(), what);
    } else if (!absl::StrContains(known->second, what)) {
      absl::StrAppend(&known->second, " ", what);
    }
  }
  for (const CLI::App* sub : VisibleSubcommands(app)) CollectEnvironment(*sub, environment);
}

// --------------------------------------------------------------- shells

std::string FunctionName(const CLI::App& app) {
  std::string name = absl::StrCat("_", absl::StrJoin(absl::StrSplit(CommandPath(app), ' '), "_"));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// Every App under `app`, itself first, depth first.
void Walk(const CLI::App& app, std::vector<const CLI::App*>& apps) {
  apps.push_back(&app);
  for (const CLI::App* sub : VisibleSubcommands(app)) Walk(*sub, apps);
}

// The path of subcommand names below the root ("" for the root, "put").
std::string PathKey(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* at = &app; at->get_parent() != nullptr; at = at->get_parent()) {
    names.push_back(at->get_name());
  }
  std::reverse(names.begin(), names.end());
  return absl::StrJoin(names, " ");
}

std::string BashCase(const std::vector<std::string>& patterns) {
  std::vector<std::string> quoted;
  for (const std::string& pattern : patterns) quoted.push_back(absl::StrCat("\"", pattern, "\""));
  return absl::StrJoin(quoted, "|");
}

// The text of a zsh single-quoted word.
std::string ZshQuoted(const std::string& text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "'\\''"}}), "'");
}

// A description as _arguments shows it: one line, brackets escaped, cut at
// a word near 70 characters.
std::string ZshDescription(const std::string& text) {
  std::string line = OneLine(text);
  if (line.size() > 70) {
    std::size_t cut = line.rfind(' ', 67);
    line = absl::StrCat(line.substr(0, cut == std::string::npos ? 67 : cut), "...");
  }
  return absl::StrReplaceAll(line, {{"\\", "\\\\"}, {"[", "\\["}, {"]", "\\]"}});
}

// A message or action text of an _arguments spec: ':' separates fields.
std::string ZshField(const std::string& text) {
  return absl::StrReplaceAll(text, {{"\\", "\\\\"}, {":", "\\:"}});
}

std::string ZshAction(const CLI::Option& option) {
  std::vector<std::string> choices = Choices(option);
  if (!choices.empty()) return absl::StrCat("(", absl::StrJoin(choices, " "), ")");
  switch (WhatCompletes(option)) {
    case Completes::kFiles: return "_files";
    case Completes::kDirectories: return "_files -/";
    case Completes::kNothing: break;
  }
  return " ";
}

std::vector<std::string> ZshSpecs(const CLI::App& app) {
  std::vector<std::string> specs;
  for (const CLI::Option* option : AcceptedOptions(app)) {
    for (const std::string& spelling : Spellings(*option)) {
      std::string spec = absl::StrCat(Repeats(*option) ? "*" : "", spelling);
      std::string description = ZshDescription(option->get_description());
      if (IsFlag(*option)) {
        absl::StrAppend(&spec, "[", description, "]");
      } else {
        bool long_name = absl::StartsWith(spelling, "--");
        absl::StrAppend(&spec, long_name ? "=" : "", "[", description, "]:",
                        ValueIsOptional(*option) ? ":" : "",
                        ZshField(ValueName(*option)), ":", ZshField(ZshAction(*option)));
      }
      specs.push_back(ZshQuoted(spec));
    }
  }
  int position = 0;
  for (const CLI::Option* positional : Positionals(app)) {
    ++position;
    std::string spec = absl::StrCat(Repeats(*positional) ? "*" : std::to_string(position), ":",
                                    positional->get_required() ? "" : ":",
                                    ZshField(positional->get_name(true)), ":",
                                    ZshField(ZshAction(*positional)));
    specs.push_back(ZshQuoted(spec));
  }
  return specs;
}

void AppendZshFunction(const CLI::App& app, std::ostringstream& out) {
  std::vector<const CLI::App*> subs = VisibleSubcommands(app);
  out << FunctionName(app) << "() {\n";
  std::string continuation = " \\\n    ";
  if (subs.empty()) {
    out << "  _arguments -s";
    for (const std::string& spec : ZshSpecs(app)) out << continuation << spec;
    out << "\n}\n\n";
    return;
  }
  out << "  local curcontext=$curcontext state line ret=1\n"
      << "  typeset -A opt_args\n"
      << "  _arguments -C -s";
  for (const std::string& spec : ZshSpecs(app)) out << continuation << spec;
  out << continuation << "': :->command'" << continuation << "'*:: :->argument' && ret=0\n"
      << "  case $state in\n"
      << "    command)\n"
      << "      local -a commands=(\n";
  for (const CLI::App* sub : subs) {
    out << "        "
        << ZshQuoted(absl::StrCat(ZshField(sub->get_name()), ":",
                                  OneLine(sub->get_description())))
        << "\n";
  }
  out << "      )\n"
      << "      _describe -t commands " << ZshQuoted(CommandPath(app) + " command")
      << " commands && ret=0\n"
      << "      ;;\n"
      << "    argument)\n"
      << "      curcontext=${curcontext%:*:*}:"
      << absl::StrReplaceAll(CommandPath(app), {{" ", "-"}})
      << "-$words[1]:\n"
      << "      case $words[1] in\n";
  for (const CLI::App* sub : subs) {
    out << "        " << sub->get_name() << ") " << FunctionName(*sub) << " && ret=0 ;;\n";
  }
  out << "      esac\n"
      << "      ;;\n"
      << "  esac\n"
      << "  return ret\n"
      << "}\n\n";
  for (const CLI::App* sub : subs) AppendZshFunction(*sub, out);
}

}  // namespace

std::vector<const CLI::App*> VisibleSubcommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* sub) {
    return !sub->get_name().empty() && !sub->get_group().empty();
  });
}

std::vector<const CLI::Option*> VisibleOptions(const CLI::App& app) {
  return app.get_options([](const CLI::Option* option) { return !option->get_group().empty(); });
}

std::vector<std::string> Spellings(const CLI::Option& option) {
  if (option.get_positional() && option.get_lnames().empty() && option.get_snames().empty()) {
    return {option.get_name(true)};
  }
  std::vector<std::string> spellings;
  for (const std::string& name : option.get_snames()) spellings.push_back("-" + name);
  for (const std::string& name : option.get_lnames()) spellings.push_back("--" + name);
  return spellings;
}

std::vector<std::string> Choices(const CLI::Option& option) {
  if (IsFlag(option)) return {};
  std::vector<std::string> choices;
  for (const std::string& description : ValidatorDescriptions(option)) {
    absl::string_view set = description;
    if (!absl::ConsumePrefix(&set, "{") || !absl::ConsumeSuffix(&set, "}")) continue;
    for (absl::string_view item : absl::StrSplit(set, ',', absl::SkipEmpty())) {
      choices.emplace_back(absl::StripAsciiWhitespace(item));
    }
    return choices;
  }
  std::string type = TypeName(option);
  if (!absl::StrContains(type, '|')) return {};
  for (absl::string_view item : absl::StrSplit(type, '|')) {
    bool word = !item.empty() && std::all_of(item.begin(), item.end(), [](char c) {
      return std::islower(static_cast<unsigned char>(c)) ||
             std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
    if (word) choices.emplace_back(item);
  }
  return choices;
}

std::string ManPage(const CLI::App& app, const Page& page) {
  std::ostringstream out;
  std::string name = NameOf(app);
  out << ".\\\" Generated by memd-clidoc from " << name
      << "'s own command line (CLI11); do not edit.\n"
      << ".TH " << absl::AsciiStrToUpper(Roff(name)) << " " << page.section << " \"\" \""
      << RoffQuoted(page.source) << "\" \"memd manual\"\n"
      << ".SH NAME\n"
      << Roff(name) << " \\- " << Roff(page.summary) << "\n"
      << ".SH SYNOPSIS\n"
      << ".B " << Roff(name) << "\n"
      << Usage(app) << "\n"
      << ".SH DESCRIPTION\n";
  for (const std::string& paragraph : page.description) {
    out << ".PP\n" << Roff(paragraph) << "\n";
  }
  if (!app.get_footer().empty()) out << TextBlock(app.get_footer());
  out << ".SH OPTIONS\n";
  for (const CLI::Option* option : VisibleOptions(app)) out << OptionEntry(*option, page);
  if (!VisibleSubcommands(app).empty()) {
    out << ".SH COMMANDS\n";
    AppendCommands(app, page, out);
  }
  std::vector<std::pair<std::string, std::string>> environment = page.environment;
  CollectEnvironment(app, environment);
  if (!environment.empty()) out << ".SH ENVIRONMENT\n" << DefinitionList(environment, true);
  if (!page.files.empty()) out << ".SH FILES\n" << DefinitionList(page.files, false);
  if (!page.exit_status.empty()) {
    out << ".SH \"EXIT STATUS\"\n" << DefinitionList(page.exit_status, true);
  }
  if (!page.see_also.empty()) {
    out << ".SH \"SEE ALSO\"\n";
    for (std::size_t i = 0; i < page.see_also.size(); ++i) {
      const std::string& reference = page.see_also[i];
      std::size_t paren = reference.find('(');
      out << ".BR " << Roff(reference.substr(0, paren)) << " "
          << (paren == std::string::npos ? "" : reference.substr(paren))
          << (i + 1 < page.see_also.size() ? "," : "") << "\n";
    }
  }
  return out.str();
}

std::string BashCompletion(const CLI::App& app) {
  std::vector<const CLI::App*> apps;
  Walk(app, apps);
  std::ostringstream out;
  std::string name = NameOf(app);
  std::string function = FunctionName(app);
  out << "# bash completion for " << name << ". Generated by memd-clidoc from " << name
      << "'s own\n# command line (CLI11); do not edit. Needs bash 4, not bash-completion.\n"
      << function << "() {\n"
      << "  local cur=${COMP_WORDS[COMP_CWORD]} prev='' path='' word i skip=0\n"
      << "  local opts subs files\n"
      << "  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}\n"
      << "  COMPREPLY=()\n"
      << "  # Which subcommand the words so far reach; an option's value is no\n"
      << "  # subcommand.\n"
      << "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      << "    word=${COMP_WORDS[i]}\n"
      << "    if ((skip)); then skip=0; continue; fi\n"
      << "    case \"$path/$word\" in\n";
  std::vector<std::string> takes_value;
  // prev's value: choices, files, directories, or something to type.
  std::map<std::string, std::vector<std::string>> value_cases;
  for (const CLI::App* at : apps) {
    std::string key = PathKey(*at);
    for (const CLI::App* sub : VisibleSubcommands(*at)) {
      out << "      \"" << key << "/" << sub->get_name() << "\") path=\"" << PathKey(*sub)
          << "\" ;;\n";
    }
    for (const CLI::Option* option : AcceptedOptions(*at)) {
      if (IsFlag(*option) || ValueIsOptional(*option)) continue;
      std::string action;
      std::vector<std::string> choices = Choices(*option);
      if (!choices.empty()) {
        action = absl::StrCat("COMPREPLY=($(compgen -W '", absl::StrJoin(choices, " "),
                              "' -- \"$cur\"))");
      } else if (WhatCompletes(*option) == Completes::kFiles) {
        action = "compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- \"$cur\"))";
      } else if (WhatCompletes(*option) == Completes::kDirectories) {
        action = "compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- \"$cur\"))";
      } else {
        action = ":";  // A value to type.
      }
      for (const std::string& spelling : Spellings(*option)) {
        std::string pattern = absl::StrCat(key, "/", spelling);
        takes_value.push_back(pattern);
        value_cases[action].push_back(pattern);
      }
    }
  }
  if (!takes_value.empty()) out << "      " << BashCase(takes_value) << ") skip=1 ;;\n";
  out << "    esac\n"
      << "  done\n"
      << "  case \"$path/$prev\" in\n";
  for (const auto& [action, patterns] : value_cases) {
    out << "    " << BashCase(patterns) << ")\n      " << action << "\n      return 0 ;;\n";
  }
  out << "  esac\n"
      << "  case $path in\n";
  for (const CLI::App* at : apps) {
    std::vector<std::string> options, subs;
    for (const CLI::Option* option : AcceptedOptions(*at)) {
      for (const std::string& spelling : Spellings(*option)) options.push_back(spelling);
    }
    for (const CLI::App* sub : VisibleSubcommands(*at)) subs.push_back(sub->get_name());
    std::string files;
    for (const CLI::Option* positional : Positionals(*at)) {
      for (const std::string& choice : Choices(*positional)) subs.push_back(choice);
      if (WhatCompletes(*positional) == Completes::kFiles) files = "f";
      if (WhatCompletes(*positional) == Completes::kDirectories && files.empty()) files = "d";
    }
    out << "    \"" << PathKey(*at) << "\")\n"
        << "      opts='" << absl::StrJoin(options, " ") << "'\n"
        << "      subs='" << absl::StrJoin(subs, " ") << "'\n"
        << "      files='" << files << "' ;;\n";
  }
  out << "    *) return 0 ;;\n"
      << "  esac\n"
      << "  if [[ $cur == -* ]]; then\n"
      << "    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
      << "    return 0\n"
      << "  fi\n"
      << "  COMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n"
      << "  if [[ -n $files ]]; then\n"
      << "    compopt -o filenames 2>/dev/null\n"
      << "    COMPREPLY+=($(compgen -\"$files\" -- \"$cur\"))\n"
      << "  fi\n"
      << "  return 0\n"
      << "}\n"
      << "complete -F " << function << " " << name << "\n";
  return out.str();
}

std::string ZshCompletion(const CLI::App& app) {
  std::ostringstream out;
  std::string name = NameOf(app);
  std::string function = FunctionName(app);
  out << "#compdef " << name << "\n"
      << "# zsh completion for " << name << ". Generated by memd-clidoc from " << name
      << "'s own\n# command line (CLI11); do not edit.\n\n";
  AppendZshFunction(app, out);
  // Autoloaded from fpath, the file is the function's body: run it; sourced,
  // register it.
  out << "if [ \"$funcstack[1]\" = \"" << function << "\" ]; then\n"
      << "  " << function << " \"$@\"\n"
      << "else\n"
      << "  compdef " << function << " " << name << "\n"
      << "fi\n";
  return out.str();
}

}  // namespace memd::clidoc
