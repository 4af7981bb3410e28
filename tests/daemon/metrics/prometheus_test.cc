// memd's metrics checked by Prometheus itself: promtool lints a live scrape,
// and a real Prometheus server, running the shipped scrape configuration,
// scrapes a running memd and answers queries for every family.

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/http_get.h"
#include "tests/support/prometheus_server.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using test::DaemonProcess;
using test::HttpGet;
using test::PrometheusServer;
using test::ProgramResult;
using test::RunProgram;

constexpr char kPromtool[] = "/usr/bin/promtool";

// The families the metrics contract names (Operations issue), and the
// per-uid usage; each must
// have samples after Exercise().
const char* const kFamilies[] = {
    "memd_pool_reserved_bytes",         "memd_pool_used_bytes",
    "memd_pool_free_bytes",             "memd_pool_peak_reserved_bytes",
    "memd_pool_requests_total",         "memd_pool_hit_ratio",
    "memd_pool_fragmentation_ratio",    "memd_pool_largest_free_block_bytes",
    "memd_pool_segments",               "memd_pool_scrubbed_bytes_total",
    "memd_buffers",                     "memd_sessions",
    "memd_leases",                      "memd_rpc_duration_seconds_bucket",
    "memd_quota_rejections_total",      "memd_build_info",
    "memd_uid_bytes",                   "memd_transfer_paths_total",
    "memd_transfer_failures_total",     "memd_transfers_active",
    "memd_transfer_admission_rejections_total", "memd_generation",
    "memd_recovery_adopted_buffers",    "memd_durability_recording"};

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = DaemonProcess::Start({"--max-buffers", "3"});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto client = Client::Connect({.socket_dir = daemon_->socket_dir()});
    ASSERT_TRUE(client.ok());
    client_ = std::move(*client);
    metrics_ = client_->Stats()->metrics_address;
    ASSERT_FALSE(metrics_.empty());
  }

  // Traffic that puts a sample in every family: buffers in each state,
  // hits and misses, a refused request, calls that fail.
  void Exercise() {
    auto sealed = client_->Create("sealed", 1 << 20);
    ASSERT_TRUE(sealed.ok());
    ASSERT_TRUE(sealed->Seal().ok());
    held_.push_back(std::move(*sealed));
    auto creating = client_->Create("creating", 4096);
    ASSERT_TRUE(creating.ok());
    held_.push_back(std::move(*creating));
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(client_->Create("tmp", 8192, {.persistence = Persistence::kEphemeral}).ok());
    }
    auto reader = client_->Open("sealed");
    ASSERT_TRUE(reader.ok());
    held_.push_back(std::move(*reader));
    auto third = client_->Create("third", 4096);
    ASSERT_TRUE(third.ok());
    held_.push_back(std::move(*third));
    EXPECT_EQ(client_->Create("fourth", 4096).status().code(),
              absl::StatusCode::kResourceExhausted);  // max_buffers 3.
    EXPECT_FALSE(client_->Open("nope").ok());
    ASSERT_TRUE(client_->Unlink("sealed").ok());  // Unlinked, still leased.
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  std::vector<Buffer> held_;
  std::string metrics_;
};

TEST_F(MetricsTest, ALiveScrapePassesPromtool) {
  if (::access(kPromtool, X_OK) != 0) {
    GTEST_SKIP() << kPromtool << " is missing: tools/dev installs it (Debian package "
                 << "'prometheus'); install it to run this test";
  }
  Exercise();
  auto scrape = HttpGet(metrics_, "/metrics");
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  ASSERT_EQ(scrape->status, 200);
  for (const char* family : kFamilies) {
    EXPECT_THAT(scrape->body, HasSubstr(family)) << family;
  }
  // promtool reads the exposition on stdin; any lint problem fails it.
  ProgramResult lint = RunProgram(kPromtool, {"check", "metrics"}, scrape->body);
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;
  EXPECT_EQ(lint.out + lint.err, "") << "promtool had remarks";
}

TEST_F(MetricsTest, PrometheusScrapesMemdAndAnswersForEveryFamily) {
  if (!PrometheusServer::Installed()) {
    GTEST_SKIP() << PrometheusServer::kBinary << " is missing: tools/dev installs the "
                 << "Debian package 'prometheus'; install it to run this test";
  }
  Exercise();
  auto prometheus = PrometheusServer::Start(metrics_);
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  ASSERT_TRUE((*prometheus)->AwaitData("up{job=\"memd\"} == 1").ok());
  for (const char* family : kFamilies) {
    EXPECT_TRUE((*prometheus)->AwaitData(family).ok()) << family;
  }
  // The values are memd's: the hit ratio, the refusal, the node's name in
  // instance (the host alone, by the shipped relabelling).
  auto ratio = (*prometheus)->Query("memd_pool_hit_ratio{location=\"host\"}");
  ASSERT_TRUE(ratio.ok()) << ratio.status();
  ASSERT_EQ((*ratio)["result"].size(), 1u);
  const double hit_ratio = std::stod((*ratio)["result"][0]["value"][1].get<std::string>());
  EXPECT_GT(hit_ratio, 0.0);
  EXPECT_LE(hit_ratio, 1.0);
  auto refused = (*prometheus)->Query("memd_quota_rejections_total{limit=\"max_buffers\"}");
  ASSERT_TRUE(refused.ok());
  ASSERT_EQ((*refused)["result"].size(), 1u);
  EXPECT_EQ((*refused)["result"][0]["value"][1], "1");
  EXPECT_EQ((*refused)["result"][0]["metric"]["instance"], "127.0.0.1");
  auto p99 = (*prometheus)->Query(
      "histogram_quantile(0.99, sum by (le, method) "
      "(rate(memd_rpc_duration_seconds_bucket[1m])))");
  EXPECT_TRUE(p99.ok()) << p99.status();
}

}  // namespace
}  // namespace memd
