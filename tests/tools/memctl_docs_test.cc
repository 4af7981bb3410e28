// memctl's man page and completions, checked against the App memctl parses.

#include "tools/clidoc/pages.h"
#include "tests/support/cli_docs.h"
#include "tests/tools/memctl_fixture.h"

namespace memd::memctl_test {
namespace {

// memctl's man page and completions (tools/clidoc), written from the App
// memctl parses: every subcommand and option in them, walked here with
// CLI11's own accessors (tests/support/cli_docs.h). No daemon needed.
class MemctlDocsTest : public ::testing::Test {
 protected:
  const clidoc::Program memctl_ = clidoc::Memctl();
  const CLI::App& app_ = *memctl_.app;
};

TEST_F(MemctlDocsTest, ManPageHasEverySubcommandAndOptionAndRendersWithoutWarnings) {
  // The walk sees every subcommand memctl declares.
  std::vector<test::CliItem> items = test::CliItems(app_);
  EXPECT_EQ(std::count_if(items.begin(), items.end(),
                          [](const test::CliItem& item) {
                            return item.kind == test::CliItem::Kind::kSubcommand;
                          }),
            std::ssize(memctl::Subcommands()));
  const std::string page = clidoc::ManPage(app_, memctl_.page);
  EXPECT_THAT(test::ManPageProblems(app_, page), IsEmpty());
  for (const char* section : {".SH NAME\nmemctl \\- ", ".SH SYNOPSIS", ".SH DESCRIPTION",
                              ".SH OPTIONS", ".SH COMMANDS", ".SH ENVIRONMENT", ".SH FILES",
                              ".SH \"EXIT STATUS\"", ".SH \"SEE ALSO\""}) {
    EXPECT_THAT(page, HasSubstr(section));
  }
  // --socket-dir's environment variable, from the option itself.
  EXPECT_THAT(page, HasSubstr(".TP\n\\fBMEMD_SOCKET_DIR\\fR\n"));
}

TEST_F(MemctlDocsTest, BashCompletesEverySubcommandAndOption) {
  EXPECT_THAT(test::BashCompletionProblems(app_, clidoc::BashCompletion(app_)), IsEmpty());
}

TEST_F(MemctlDocsTest, BashCompletesPrefixesChoicesAndFiles) {
  TempDir dir;
  WriteWholeFile(dir.Join("weights.bin"), "w");
  std::vector<std::vector<std::string>> replies = test::BashCompletions(
      clidoc::BashCompletion(app_), "memctl",
      {{"memctl", "st"},
       {"memctl", "put", "--ret"},
       {"memctl", "put", "--retention", "e"},
       {"memctl", "--socket-dir", "/run/memd", "--json", "pi"},
       {"memctl", "stats", "--js"},  // --json of memctl itself, after the subcommand
       {"memctl", "put", "w", dir.Join("wei")},
       {"memctl", "get", "--output", dir.Join("w")},
       {"memctl", "put", "--mode", ""}});
  EXPECT_THAT(replies[0], ElementsAre("stats"));
  EXPECT_THAT(replies[1], ElementsAre("--retention"));
  EXPECT_THAT(replies[2], ElementsAre("evictable"));
  EXPECT_THAT(replies[3], ElementsAre("ping"));
  EXPECT_THAT(replies[4], ElementsAre("--json"));
  EXPECT_THAT(replies[5], ElementsAre(dir.Join("weights.bin")));
  EXPECT_THAT(replies[6], ElementsAre(dir.Join("weights.bin")));
  EXPECT_THAT(replies[7], IsEmpty()) << "a mode is typed, not chosen from subcommands";
}

TEST_F(MemctlDocsTest, ZshCompletionPassesEverySubcommandAndOption) {
  EXPECT_THAT(test::ZshCompletionProblems(app_, clidoc::ZshCompletion(app_)), IsEmpty());
}

}  // namespace
}  // namespace memd::memctl_test
