#include "tests/support/cli_docs.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/support/files.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"

namespace memd::test {
namespace {

std::vector<const CLI::App*> Subcommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* sub) {
    return !sub->get_name().empty() && !sub->get_group().empty();
  });
}

std::vector<const CLI::Option*> Options(const CLI::App& app) {
  return app.get_options([](const CLI::Option* option) { return !option->get_group().empty(); });
}

std::vector<std::string> SpellingsOf(const CLI::Option& option) {
  std::vector<std::string> spellings;
  for (const std::string& name : option.get_snames()) spellings.push_back("-" + name);
  for (const std::string& name : option.get_lnames()) spellings.push_back("--" + name);
  if (spellings.empty()) spellings.push_back(option.get_name(true));
  return spellings;
}

void Collect(const CLI::App& app, const std::string& path, std::vector<CliItem>& items) {
  for (const CLI::Option* option : Options(app)) {
    bool positional = option->get_lnames().empty() && option->get_snames().empty();
    for (const std::string& spelling : SpellingsOf(*option)) {
      items.push_back({positional ? CliItem::Kind::kPositional : CliItem::Kind::kOption, path,
                       spelling});
    }
  }
  for (const CLI::App* sub : Subcommands(app)) {
    items.push_back({CliItem::Kind::kSubcommand, path, sub->get_name()});
    Collect(*sub, path.empty() ? sub->get_name() : absl::StrCat(path, " ", sub->get_name()),
            items);
  }
}

// The App at `path` under `app`.
const CLI::App* AppAt(const CLI::App& app, const std::string& path) {
  const CLI::App* at = &app;
  for (absl::string_view name : absl::StrSplit(path, ' ', absl::SkipEmpty())) {
    at = at->get_subcommand(std::string(name));
  }
  return at;
}

// The paths of `app` and every subcommand under it.
std::vector<std::string> Paths(const CLI::App& app) {
  std::vector<std::string> paths = {""};
  for (const CliItem& item : CliItems(app)) {
    if (item.kind == CliItem::Kind::kSubcommand) {
      paths.push_back(item.path.empty() ? item.text : absl::StrCat(item.path, " ", item.text));
    }
  }
  return paths;
}

bool IsWordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

// `word` in `text` with no word character either side: --wait is not in
// --wait-for-memory.
bool ContainsWord(const std::string& text, const std::string& word) {
  for (std::size_t at = text.find(word); at != std::string::npos;
       at = text.find(word, at + 1)) {
    bool before = at == 0 || !IsWordChar(text[at - 1]);
    bool after = at + word.size() == text.size() || !IsWordChar(text[at + word.size()]);
    if (before && after) return true;
  }
  return false;
}

// Roff back to plain text, enough to find names in it.
std::string Unroff(const std::string& text) {
  return absl::StrReplaceAll(text, {{"\\-", "-"},
                                    {"\\fB", ""},
                                    {"\\fI", ""},
                                    {"\\fR", ""},
                                    {"\\(dq", "\""},
                                    {"\\&", ""},
                                    {"\\e", "\\"}});
}

std::string ShellQuoted(const std::string& word) {
  return absl::StrCat("'", absl::StrReplaceAll(word, {{"'", "'\\''"}}), "'");
}

// Output in blocks, each starting with a line "@@ <title>".
std::map<std::string, std::vector<std::string>> Blocks(const std::string& out) {
  std::map<std::string, std::vector<std::string>> blocks;
  std::vector<std::string>* block = nullptr;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "@@ ")) {
      block = &blocks[std::string(line)];
    } else if (block != nullptr) {
      block->emplace_back(line);
    }
  }
  return blocks;
}

std::string FunctionOf(const std::string& program, const std::string& path) {
  std::string name = absl::StrCat("_", program);
  for (absl::string_view sub : absl::StrSplit(path, ' ', absl::SkipEmpty())) {
    absl::StrAppend(&name, "_", sub);
  }
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

}  // namespace

std::vector<CliItem> CliItems(const CLI::App& app) {
  std::vector<CliItem> items;
  Collect(app, "", items);
  return items;
}

std::vector<std::string> ManPageProblems(const CLI::App& app, const std::string& roff) {
  std::vector<std::string> problems;
  // The text of each section by path: OPTIONS is the program's (""), each
  // .SS "prog path" a subcommand's; other sections belong to none.
  const std::string program = app.get_name();
  std::map<std::string, std::string> sections;
  std::string* section = nullptr;
  for (absl::string_view line : absl::StrSplit(roff, '\n')) {
    std::string plain = Unroff(std::string(line));
    if (absl::StartsWith(plain, ".SH")) {
      section = absl::StrContains(plain, "OPTIONS") ? &sections[""] : nullptr;
      continue;
    }
    if (absl::ConsumePrefix(&line, ".SS ")) {
      const std::string quoted = Unroff(std::string(line));
      absl::string_view title = absl::StripSuffix(absl::StripPrefix(quoted, "\""), "\"");
      if (!absl::ConsumePrefix(&title, program + " ")) {
        problems.push_back(absl::StrCat("section '", title, "' does not start with ", program));
        section = nullptr;
        continue;
      }
      section = &sections[std::string(title)];
      continue;
    }
    if (section != nullptr) absl::StrAppend(section, plain, "\n");
  }
  for (const CliItem& item : CliItems(app)) {
    if (item.kind == CliItem::Kind::kSubcommand) {
      std::string path = item.path.empty() ? item.text : absl::StrCat(item.path, " ", item.text);
      if (!sections.contains(path)) {
        problems.push_back(absl::StrCat("no section .SS \"", program, " ", path, "\""));
      }
      continue;
    }
    auto at = sections.find(item.path);
    if (at == sections.end() || !ContainsWord(at->second, item.text)) {
      problems.push_back(absl::StrCat(item.text, " of '", program, " ", item.path,
                                      "' is not in its section of the man page"));
    }
  }
  if (!PathExists("/usr/bin/groff")) {
    problems.push_back("groff not found (tools/dev deps installs groff-base)");
    return problems;
  }
  TempDir dir;
  const std::string page = dir.Join("page.roff");
  WriteWholeFile(page, roff);
  ProgramResult groff = RunProgram("/usr/bin/groff", {"-man", "-Tutf8", "-ww", "-z", page});
  if (groff.exit_code != 0 || !groff.err.empty()) {
    problems.push_back(absl::StrCat("groff -man -Tutf8 -ww: ", Describe(groff)));
  }
  return problems;
}

std::vector<std::vector<std::string>> BashCompletions(
    const std::string& script, const std::string& program,
    const std::vector<std::vector<std::string>>& words) {
  TempDir dir;
  const std::string file = dir.Join(program);
  WriteWholeFile(file, script);
  // As bash calls a completion function (complete -F): COMP_WORDS,
  // COMP_CWORD, COMP_LINE, COMP_POINT set; arguments command, word, previous
  // word. The function is whichever the script registered for `program`.
  std::string driver = absl::StrCat(
      "source \"$1\" || exit 3\n"
      "function=$(complete -p ", ShellQuoted(program),
      " | sed -n 's/.* -F \\([^ ]*\\) .*/\\1/p')\n"
      "[ -n \"$function\" ] || { echo 'no complete -F for ", program, "' >&2; exit 4; }\n"
      "query() {\n"
      "  COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); COMP_LINE=\"$*\"\n"
      "  COMP_POINT=${#COMP_LINE}; COMPREPLY=()\n"
      "  \"$function\" \"$1\" \"${COMP_WORDS[COMP_CWORD]}\" \"${COMP_WORDS[COMP_CWORD - 1]}\"\n"
      "  printf '%s\\n' \"${COMPREPLY[@]}\"\n"
      "}\n");
  for (std::size_t i = 0; i < words.size(); ++i) {
    std::vector<std::string> quoted;
    for (const std::string& word : words[i]) quoted.push_back(ShellQuoted(word));
    absl::StrAppend(&driver, "echo '@@ ", i, "'; query ", absl::StrJoin(quoted, " "), "\n");
  }
  ProgramResult bash =
      RunProgram("/bin/bash", {"--norc", "--noprofile", "-c", driver, "bash", file});
  std::vector<std::vector<std::string>> replies(words.size());
  if (bash.exit_code != 0 || !bash.err.empty()) {
    replies.assign(words.size(), {absl::StrCat("bash failed: ", Describe(bash))});
    return replies;
  }
  for (auto& [index, lines] : Blocks(bash.out)) replies[std::stoul(index)] = lines;
  return replies;
}

std::vector<std::string> BashCompletionProblems(const CLI::App& app,
                                                const std::string& script) {
  const std::string program = app.get_name();
  std::vector<std::vector<std::string>> queries;
  std::vector<std::set<std::string>> wanted;
  for (const std::string& path : Paths(app)) {
    std::vector<std::string> words = {program};
    for (absl::string_view name : absl::StrSplit(path, ' ', absl::SkipEmpty())) {
      words.emplace_back(name);
    }
    const CLI::App* at = AppAt(app, path);
    // Options: its own, and its parents' while CLI11 falls through to them.
    std::set<std::string> options;
    for (const CLI::App* from = at; from != nullptr;
         from = from->get_fallthrough() ? from->get_parent() : nullptr) {
      for (const CLI::Option* option : Options(*from)) {
        if (option->get_lnames().empty() && option->get_snames().empty()) continue;
        for (const std::string& spelling : SpellingsOf(*option)) options.insert(spelling);
      }
    }
    words.push_back("-");
    queries.push_back(words);
    wanted.push_back(options);
    std::set<std::string> subs;
    for (const CLI::App* sub : Subcommands(*at)) subs.insert(sub->get_name());
    words.back() = "";
    queries.push_back(words);
    wanted.push_back(subs);
  }
  std::vector<std::vector<std::string>> replies = BashCompletions(script, program, queries);
  std::vector<std::string> problems;
  for (std::size_t i = 0; i < queries.size(); ++i) {
    for (const std::string& word : wanted[i]) {
      if (std::find(replies[i].begin(), replies[i].end(), word) == replies[i].end()) {
        problems.push_back(absl::StrCat("bash: '", absl::StrJoin(queries[i], " "),
                                        "' does not complete to ", word, " (got: ",
                                        absl::StrJoin(replies[i], " "), ")"));
      }
    }
  }
  return problems;
}

std::vector<std::string> ZshCompletionProblems(const CLI::App& app,
                                               const std::string& script) {
  const std::string program = app.get_name();
  if (!PathExists("/usr/bin/zsh")) return {"zsh not found (tools/dev deps installs it)"};
  TempDir dir;
  const std::string file = dir.Join("_" + program);
  WriteWholeFile(file, script);
  std::vector<std::string> problems;
  ProgramResult syntax = RunProgram("/usr/bin/zsh", {"-n", file});
  if (syntax.exit_code != 0 || !syntax.err.empty()) {
    return {absl::StrCat("zsh -n: ", Describe(syntax))};
  }
  // zsh's completion functions replaced by ones that print what they are
  // given; _arguments sets state (zsh's scoping is dynamic) so that a
  // function with subcommands goes on to list them.
  std::string driver =
      "compdef() { :; }\n"
      "_arguments() { print -rl -- \"$@\"; state=command; return 0; }\n"
      "_describe() { local name=${@[-1]}; print -rl -- \"${(@P)name}\"; return 0; }\n"
      "source \"$1\"\n";
  const std::vector<std::string> paths = Paths(app);
  for (const std::string& path : paths) {
    absl::StrAppend(&driver, "print -r -- '@@ ", path, "'\n", FunctionOf(program, path), "\n");
  }
  ProgramResult zsh = RunProgram("/usr/bin/zsh", {"-f", "-c", driver, "zsh", file});
  if (zsh.exit_code != 0 || !zsh.err.empty()) {
    return {absl::StrCat("zsh: ", Describe(zsh))};
  }
  std::map<std::string, std::vector<std::string>> blocks = Blocks(zsh.out);
  for (const CliItem& item : CliItems(app)) {
    const std::vector<std::string>& lines = blocks[item.path];
    auto found = std::find_if(lines.begin(), lines.end(), [&](const std::string& line) {
      absl::string_view spec = line;
      switch (item.kind) {
        case CliItem::Kind::kSubcommand:  // _describe's NAME:DESCRIPTION.
          return absl::StartsWith(spec, item.text + ":");
        case CliItem::Kind::kPositional:  // N:NAME:ACTION, N::NAME:ACTION, *:NAME:ACTION
          return absl::StrContains(spec, ":" + item.text + ":");
        case CliItem::Kind::kOption:  // [*]--name[=][DESCRIPTION]...
          absl::ConsumePrefix(&spec, "*");
          return absl::ConsumePrefix(&spec, item.text) &&
                 (spec.empty() || spec[0] == '[' || spec[0] == '=' || spec[0] == ':' ||
                  spec[0] == '+');
      }
      return false;
    });
    if (found == lines.end()) {
      problems.push_back(absl::StrCat("zsh: ", item.text, " of '", program, " ", item.path,
                                      "' is not given to _arguments/_describe by ",
                                      FunctionOf(program, item.path)));
      continue;
    }
    // A flag's spec ends at its description; an option's goes on to its
    // value (":MESSAGE:ACTION"), or _arguments would take the next word as
    // the value, or never complete one.
    if (item.kind == CliItem::Kind::kOption) {
      bool takes_value = AppAt(app, item.path)->get_option(item.text)->get_expected_max() > 0;
      bool spec_takes_value = !absl::EndsWith(*found, "]");
      if (takes_value != spec_takes_value) {
        problems.push_back(absl::StrCat("zsh: ", item.text, " of '", program, " ", item.path,
                                        "' takes ", takes_value ? "a value" : "no value",
                                        ", its spec says otherwise: ", *found));
      }
    }
  }
  return problems;
}

}  // namespace memd::test
