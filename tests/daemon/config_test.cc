#include "daemon/config.h"

#include <fstream>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/cli_docs.h"
#include "tests/support/temp_dir.h"
#include "tools/clidoc/pages.h"

namespace memd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

absl::StatusOr<Config> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "memd");
  std::vector<const char*> argv;
  for (const auto& arg : args) argv.push_back(arg.c_str());
  return ParseConfig(static_cast<int>(argv.size()), argv.data());
}

TEST(ConfigTest, HelpAndVersionAreTextToPrintNotAnError) {
  for (const char* flag : {"--help", "--version"}) {
    const char* argv[] = {"memd", flag};
    absl::StatusOr<CommandLine> line = ParseCommandLine(2, argv);
    ASSERT_TRUE(line.ok()) << flag << ": " << line.status();
    EXPECT_THAT(line->text, HasSubstr("memd")) << flag;
    // Asked for a config (as a reload does), they configure nothing.
    EXPECT_TRUE(absl::IsInvalidArgument(ParseConfig(2, argv).status())) << flag;
  }
  const char* run[] = {"memd"};
  absl::StatusOr<CommandLine> line = ParseCommandLine(1, run);
  ASSERT_TRUE(line.ok());
  EXPECT_TRUE(line->text.empty());
}

TEST(ConfigTest, DefaultsAreSensible) {
  auto config = Parse({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->socket_dir, "");
  EXPECT_EQ(config->socket_mode, 0660u);
  EXPECT_EQ(config->metrics_address, "127.0.0.1:9477");
  EXPECT_EQ(config->backend, "auto");
  EXPECT_EQ(config->log_level, "info");
  EXPECT_EQ(config->max_buffer_bytes, std::uint64_t{64} << 30);
  // Not set: the daemon sizes it from its CPUs (transfer::DefaultCopyThreads).
  EXPECT_EQ(config->transfer_copy_threads, 0u);
}

TEST(ConfigTest, CopyThreadsAreAPositiveCountWhenSet) {
  auto config = Parse({"--transfer-copy-threads", "12"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->transfer_copy_threads, 12u);
  // 0 is how the daemon spells "not set", not a value an operator gives.
  EXPECT_THAT(Parse({"--transfer-copy-threads", "0"}).status().message(),
              HasSubstr("transfer-copy-threads"));
}

// One uid must not be able to take what the global limits leave for
// everybody: by default each per-uid limit is a fraction of its global one.
TEST(ConfigTest, PerUidDefaultsLeaveRoomForOtherUsers) {
  auto config = Parse({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_sessions_per_uid, 256u);
  EXPECT_EQ(config->max_buffers_per_uid, 16384u);
  EXPECT_EQ(config->max_leases_per_uid, 65536u);
  EXPECT_EQ(config->max_waits_per_uid, 1024u);
  EXPECT_EQ(config->max_waits, 16384u);
  EXPECT_LE(config->max_sessions_per_uid * 8, config->max_sessions);
  EXPECT_LE(config->max_buffers_per_uid * 4, config->max_buffers);
  EXPECT_LE(config->max_waits_per_uid * 8, config->max_waits);
  // A uid's waits fill at most four of its sessions' worth.
  EXPECT_LE(config->max_waits_per_uid, 4 * config->max_waits_per_session);
}

TEST(ConfigTest, PerUidLimitsComeFromFlagsOrTheFile) {
  test::TempDir dir;
  const std::string path = dir.Join("memd.toml");
  std::ofstream(path) << "max_sessions_per_uid = 5\n"
                         "max_buffers_per_uid = 6\n"
                         "max_leases_per_uid = 7\n"
                         "max_waits_per_uid = 8\n"
                         "max_waits = 9\n";
  auto config = Parse({"--config", path, "--max-waits", "10"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_sessions_per_uid, 5u);
  EXPECT_EQ(config->max_buffers_per_uid, 6u);
  EXPECT_EQ(config->max_leases_per_uid, 7u);
  EXPECT_EQ(config->max_waits_per_uid, 8u);
  EXPECT_EQ(config->max_waits, 10u) << "the flag wins";
  EXPECT_FALSE(Parse({"--max-sessions-per-uid", "0"}).ok());
}

TEST(ConfigTest, FlagsTakeUnitsAndOctalModes) {
  auto config = Parse({"--socket-dir", "/tmp/x", "--socket-mode", "0600",
                       "--max-buffer-bytes", "2GiB", "--pool-large-round-bytes", "0",
                       "--max-sessions", "10", "--metrics-address", "",
                       "--backend", "host", "--log-level", "debug"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->socket_dir, "/tmp/x");
  EXPECT_EQ(config->socket_mode, 0600u);
  EXPECT_EQ(config->max_buffer_bytes, std::uint64_t{2} << 30);
  EXPECT_EQ(config->pool_large_round_bytes, 0u);
  EXPECT_EQ(config->max_sessions, 10u);
  EXPECT_EQ(config->metrics_address, "");
  EXPECT_EQ(config->backend, "host");
}

TEST(ConfigTest, BadValuesNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    const char* reason;
  };
  for (const Case& c : std::vector<Case>{
           {{"--socket-mode", "0999"}, "--socket-mode"},
           {{"--socket-mode", "01777"}, "octal mode"},
           {{"--max-sessions", "0"}, "positive whole number"},
           {{"--max-sessions", "-3"}, "--max-sessions"},
           {{"--max-buffer-bytes", "0"}, "max_buffer_bytes must be positive"},
           {{"--metrics-address", "localhost"}, "HOST:PORT"},
           {{"--metrics-address", "h:70000"}, "HOST:PORT"},
           {{"--log-level", "loud"}, "'loud'"},
           {{"--backend", "tpu"}, "'tpu'"},
           {{"--pool-domain-reuse", "always"}, "never, scrub"},
           {{"--pool-idle-budget", "lots"}, "not a number"},
           {{"--pool-large-fit-slack", "-1"}, "must not be negative"},
           {{"--max-uid-bytes", "gpu=1GiB"}, "unknown location 'gpu'"},
           {{"--max-session-bytes", "lots"}, "--max-session-bytes"},
           {{"--durability", "always"}, "auto, off"},
           {{"--recovery-grace-seconds", "0"}, "positive whole number"},
           {{"--recovery-grace-seconds", "18446744073709551615"}, "a week"},
       }) {
    auto config = Parse(c.args);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument)
        << c.args[0];
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(c.reason))
        << c.args[0];
  }
}

TEST(ConfigTest, FileSetsEveryKindOfKeyAndFlagsWin) {
  test::TempDir dir;
  std::string path = dir.Join("memd.toml");
  std::ofstream(path) << "socket_dir = \"/srv/memd\"\n"
                         "socket_mode = 0o640\n"
                         "max_buffer_bytes = 4096\n"
                         "host_pool_limit_bytes = \"8 GiB\"\n"
                         "max_leases_per_session = 7\n"
                         "pool_idle_budget = 0.2\n"
                         "pool_large_fit_slack = \"1.5\"\n"
                         "log_level = \"warn\"\n";
  auto config = Parse({"--config", path, "--log-level", "error"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->socket_dir, "/srv/memd");
  EXPECT_EQ(config->socket_mode, 0640u);
  EXPECT_EQ(config->max_buffer_bytes, 4096u);
  EXPECT_EQ(config->host_pool_limit_bytes, std::uint64_t{8} << 30);
  EXPECT_EQ(config->max_leases_per_session, 7u);
  EXPECT_DOUBLE_EQ(config->pool_idle_budget, 0.2);
  EXPECT_DOUBLE_EQ(config->pool_large_fit_slack, 1.5);
  EXPECT_EQ(config->log_level, "error");
}

TEST(ConfigTest, QuotasComeFromFlagsOrTheFile) {
  auto flags = Parse({"--max-uid-bytes", "host=16GiB,device=40GiB",
                      "--max-session-bytes", "512MiB"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->max_uid_bytes, "host=16GiB,device=40GiB");
  EXPECT_EQ(flags->max_session_bytes, "512MiB");
  EXPECT_EQ(Parse({})->max_uid_bytes, "") << "no quota by default";

  test::TempDir dir;
  std::string path = dir.Join("memd.toml");
  std::ofstream(path) << "max_uid_bytes = \"pinned=1GiB\"\nmax_session_bytes = 4096\n";
  auto file = Parse({"--config", path});
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->max_uid_bytes, "pinned=1GiB");
  EXPECT_EQ(file->max_session_bytes, "4096");
  std::ofstream(path, std::ios::trunc) << "max_uid_bytes = \"host=\"\n";
  auto bad = Parse({"--config", path});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("max_uid_bytes"));
}

TEST(ConfigTest, FileErrorsSayWhereAndWhat) {
  test::TempDir dir;
  std::string path = dir.Join("memd.toml");
  std::ofstream(path) << "socket_mode = \"rw\"\n";
  auto bad_mode = Parse({"--config", path});
  EXPECT_THAT(std::string(bad_mode.status().message()), HasSubstr("socket_mode"));

  std::ofstream(path, std::ios::trunc) << "max_buffers = -1\n";
  auto negative = Parse({"--config", path});
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("max_buffers"));

  std::ofstream(path, std::ios::trunc) << "[pool]\nlimit = 1\n";
  auto table = Parse({"--config", path});
  EXPECT_THAT(std::string(table.status().message()), HasSubstr("unknown key 'pool'"));
}

TEST(ConfigTest, PlacementIsCheckedByItsParserInTheFileAndAsAFlag) {
  auto flag = Parse({"--placement", "small=4KiB,headroom=10%"});
  ASSERT_TRUE(flag.ok()) << flag.status();
  EXPECT_EQ(flag->placement, "small=4KiB,headroom=10%");
  EXPECT_EQ(Parse({})->placement, "");

  auto bad = Parse({"--placement", "headroom=150%"});
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--placement: "));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("150"));

  test::TempDir dir;
  const std::string path = dir.Join("memd.toml");
  std::ofstream(path) << "placement = \"tiny=1\"\n";
  auto file = Parse({"--config", path});
  EXPECT_TRUE(absl::IsInvalidArgument(file.status())) << file.status();
  EXPECT_THAT(std::string(file.status().message()), HasSubstr("placement"));
  EXPECT_THAT(std::string(file.status().message()), HasSubstr("tiny"));
}

TEST(ConfigTest, ShippedExampleConfigParses) {
  auto config = Parse({"--config", MEMD_SOURCE_DIR "/deploy/memd.toml"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->socket_dir, "/run/memd");
}

TEST(ConfigTest, OnlyLimitsAndLogLevelChangeWithoutRestart) {
  Config running;
  Config next = running;
  next.log_level = "debug";
  next.max_buffers = 7;
  next.max_sessions = 3;
  next.max_sessions_per_uid = 2;
  next.max_waits = 5;
  next.max_uid_bytes = "16GiB";
  next.max_session_bytes = "host=1GiB";
  next.placement = "headroom=10%";
  EXPECT_TRUE(SettingsNeedingRestart(running, next).empty());

  next.socket_mode = 0600;
  next.pool_large_fit_slack = 0.25;
  next.backend = "host";
  EXPECT_THAT(SettingsNeedingRestart(running, next),
              ::testing::ElementsAre("socket_mode", "backend",
                                     "pool_large_fit_slack"));
}

// memd's man page and completions (tools/clidoc), written from the App
// memd parses: every option in them (walked with CLI11's own accessors,
// tests/support/cli_docs.h), each with the config-file key it also is.
TEST(ConfigTest, ManPageAndCompletionsHaveEveryOptionAndConfigKey) {
  const clidoc::Program memd = clidoc::Memd();
  const CLI::App& app = *memd.app;
  const std::string page = clidoc::ManPage(app, memd.page);
  EXPECT_THAT(test::ManPageProblems(app, page), IsEmpty());
  int keys = 0;
  for (const CLI::Option* option : app.get_options()) {
    std::string key = ConfigKey(*option);
    if (key.empty()) continue;
    ++keys;
    EXPECT_TRUE(absl::StrContains(page, "Configuration key: " + key + ".\n")) << key;
  }
  EXPECT_GT(keys, 40);  // The walk saw them (50 when written).
  const std::string bash = clidoc::BashCompletion(app);
  EXPECT_THAT(test::BashCompletionProblems(app, bash), IsEmpty());
  std::vector<std::vector<std::string>> replies = test::BashCompletions(
      bash, "memd",
      {{"memd", "--log-l"}, {"memd", "--backend", "c"}, {"memd", "--durability", ""}});
  EXPECT_THAT(replies[0], ElementsAre("--log-level"));
  EXPECT_THAT(replies[1], ElementsAre("cuda"));
  EXPECT_THAT(replies[2], ElementsAre("auto", "off"));
  EXPECT_THAT(test::ZshCompletionProblems(app, clidoc::ZshCompletion(app)), IsEmpty());
}

// The choices --help lists are the ones the parse accepts (one table).
TEST(ConfigTest, ChoicesInTheHelpAreTheValuesAccepted) {
  auto app = MakeCommandLineApp();
  EXPECT_EQ(app->get_option("--backend")->get_type_name(), "auto|host|cuda|level_zero");
  for (const char* backend : {"auto", "host", "cuda", "level_zero"}) {
    EXPECT_TRUE(Parse({"--backend", backend}).ok()) << backend;
  }
  EXPECT_THAT(Parse({"--log-level", "loud"}).status().message(),
              HasSubstr("log_level 'loud' is not one of trace, debug"));
}

}  // namespace
}  // namespace memd
