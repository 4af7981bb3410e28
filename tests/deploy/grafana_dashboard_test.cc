// deploy/grafana/memd.json checked two ways: its structure is one Grafana
// imports (a datasource variable every panel uses, a node variable, unique
// ids), and every PromQL expression in it, with the variables filled in the
// way Grafana fills them, runs on a real Prometheus scraping a running memd
// under traffic and returns numbers, with the shipped scrape configuration
// and with a plain one that adds no labels.

#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "nlohmann/json.hpp"
#include "tests/support/daemon_process.h"
#include "tests/support/prometheus_server.h"

namespace memd {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using test::DaemonProcess;
using test::PrometheusServer;
using Json = nlohmann::json;

constexpr char kDashboard[] = MEMD_SOURCE_DIR "/deploy/grafana/memd.json";
constexpr char kDatasource[] = "${datasource}";

Json LoadDashboard() {
  std::ifstream in(kDashboard);
  Json dashboard = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(dashboard.is_discarded()) << kDashboard << " is not JSON";
  return dashboard;
}

// The panels that query (rows only group).
std::vector<Json> QueryPanels(const Json& dashboard) {
  std::vector<Json> panels;
  for (const Json& panel : dashboard.at("panels")) {
    if (panel.at("type") != "row") panels.push_back(panel);
  }
  return panels;
}

struct Expression {
  std::string panel;
  std::string expr;
};

std::vector<Expression> Expressions(const Json& dashboard) {
  std::vector<Expression> expressions;
  for (const Json& panel : QueryPanels(dashboard)) {
    for (const Json& target : panel.at("targets")) {
      expressions.push_back({panel.at("title"), target.at("expr")});
    }
  }
  return expressions;
}

const Json& Variable(const Json& dashboard, const std::string& name) {
  for (const Json& variable : dashboard.at("templating").at("list")) {
    if (variable.at("name") == name) return variable;
  }
  ADD_FAILURE() << "no variable " << name;
  static const Json kNone = Json::object();
  return kNone;
}

TEST(GrafanaDashboardTest, ImportsWithADatasourceAndANodeVariable) {
  const Json dashboard = LoadDashboard();
  ASSERT_FALSE(dashboard.is_discarded());
  EXPECT_EQ(dashboard.at("uid"), "memd-overview");
  EXPECT_FALSE(dashboard.contains("id") && !dashboard.at("id").is_null())
      << "an exported id would clash on import";

  const Json& datasource = Variable(dashboard, "datasource");
  EXPECT_EQ(datasource.at("type"), "datasource");
  EXPECT_EQ(datasource.at("query"), "prometheus");
  const Json& node = Variable(dashboard, "node");
  EXPECT_EQ(node.at("type"), "query");
  EXPECT_EQ(node.at("datasource").at("uid"), kDatasource);
  EXPECT_THAT(node.at("definition").get<std::string>(), HasSubstr(", instance)"))
      << "nodes are told apart by the label every scrape has, not one a relabelling adds";
  EXPECT_TRUE(node.at("multi").get<bool>());
  EXPECT_TRUE(node.at("includeAll").get<bool>());

  std::set<int> ids;
  for (const Json& panel : dashboard.at("panels")) {
    const std::string title = panel.at("title");
    EXPECT_TRUE(ids.insert(panel.at("id").get<int>()).second) << "duplicate id: " << title;
    const Json& grid = panel.at("gridPos");
    EXPECT_LE(grid.at("x").get<int>() + grid.at("w").get<int>(), 24) << title;
    if (panel.at("type") == "row") continue;
    EXPECT_EQ(panel.at("datasource").at("uid"), kDatasource) << title;
    EXPECT_FALSE(panel.value("description", "").empty()) << title << " says nothing";
    ASSERT_FALSE(panel.at("targets").empty()) << title;
    std::set<std::string> refs;
    for (const Json& target : panel.at("targets")) {
      EXPECT_TRUE(refs.insert(target.at("refId")).second) << title;
      EXPECT_EQ(target.at("datasource").at("uid"), kDatasource) << title;
      EXPECT_FALSE(target.at("expr").get<std::string>().empty()) << title;
    }
  }
}

TEST(GrafanaDashboardTest, ShowsWhatOperatorsNeed) {
  const Json dashboard = LoadDashboard();
  std::string all;
  for (const Expression& expression : Expressions(dashboard)) {
    absl::StrAppend(&all, expression.expr, "\n");
  }
  for (const char* family :
       {"memd_pool_used_bytes", "memd_pool_reserved_bytes", "memd_pool_peak_reserved_bytes",
        "memd_pool_limit_bytes", "memd_pool_requests_total", "memd_pool_hit_ratio",
        "memd_pool_fragmentation_ratio", "memd_pool_largest_free_block_bytes",
        "memd_buffers", "memd_sessions", "memd_leases", "memd_rpc_duration_seconds_bucket",
        "memd_quota_rejections_total", "memd_build_info",
        "memd_pressure_reclaimed_bytes_total", "memd_leak_bytes", "memd_device_memory_bytes",
        "memd_transfer_bytes_total", "memd_transfers_active", "memd_transfer_queued",
        "memd_transfer_queue_wait_seconds_total", "memd_transfer_staging_seconds_total",
        "memd_transfer_dma_seconds_total", "memd_transfer_staging_slots_in_use",
        "memd_transfer_failures_total", "memd_device_healthy"}) {
    EXPECT_THAT(all, HasSubstr(family));
  }
  EXPECT_THAT(all, HasSubstr("histogram_quantile(0.5,"));
  EXPECT_THAT(all, HasSubstr("histogram_quantile(0.99,"));
  // Every pool panel can be narrowed to a node and a location.
  for (const Expression& expression : Expressions(dashboard)) {
    EXPECT_THAT(expression.expr, HasSubstr("instance=~\"$node\"")) << expression.panel;
    if (absl::StrContains(expression.expr, "memd_pool_")) {
      EXPECT_THAT(expression.expr, HasSubstr("location=~\"$location\"")) << expression.panel;
    }
  }
}

// Client traffic until destroyed, so that every rate has something to
// measure: creates (hits after the first), opens, refusals (max_buffers),
// copies (the transfer panels) and stats calls.
class Traffic {
 public:
  explicit Traffic(std::unique_ptr<Client> client)
      : client_(std::move(client)), thread_([this] { Run(); }) {}
  ~Traffic() {
    stop_ = true;
    thread_.join();
  }

 private:
  void Run() {
    while (!stop_) {
      auto scratch = client_->Create("scratch", 8192, {.persistence = Persistence::kEphemeral});
      // With "scratch" the daemon is at --max-buffers: this one is refused.
      auto refused = client_->Create("refused", 4096);
      EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
      auto reader = client_->Open("sealed");
      if (scratch.ok() && reader.ok()) {
        auto copy = client_->Copy(Region{&*reader, 0, 8192}, Region{&*scratch});
        EXPECT_TRUE(copy.ok()) << copy.status();
        if (copy.ok()) {
          EXPECT_TRUE(copy->Wait().ok());
        }
      }
      (void)client_->Stats();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::unique_ptr<Client> client_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The values Grafana would offer for a variable: its label_values() query
// as PromQL, with the variables before it already filled in.
std::vector<std::string> VariableValues(PrometheusServer& prometheus, const Json& variable,
                                        const std::map<std::string, std::string>& known) {
  static const std::regex kLabelValues(R"(^label_values\((.*),\s*(\w+)\)$)");
  const std::string definition =
      absl::StrReplaceAll(variable.at("definition").get<std::string>(), known);
  std::smatch match;
  if (!std::regex_match(definition, match, kLabelValues)) {
    ADD_FAILURE() << "not label_values(SELECTOR, LABEL): " << definition;
    return {};
  }
  const std::string label = match[2];
  auto data = prometheus.Query(absl::StrCat("group by (", label, ") (", match[1].str(), ")"));
  EXPECT_TRUE(data.ok()) << data.status();
  std::vector<std::string> values;
  if (data.ok()) {
    for (const Json& series : (*data)["result"]) {
      // A series without the label: Grafana offers no value for it.
      const std::string value = series["metric"].value(label, std::string());
      if (!value.empty()) values.push_back(value);
    }
  }
  return values;
}

// Grafana's text for a multi-value variable inside a regex matcher.
std::string RegexOf(const std::vector<std::string>& values) {
  return absl::StrCat("(", absl::StrJoin(values, "|"), ")");
}

bool HasANumber(const Json& data) {
  for (const Json& series : data["result"]) {
    const double value = std::stod(series["value"][1].get<std::string>());
    if (std::isfinite(value)) return true;
  }
  return false;
}

// Every expression of `dashboard`, with `variables` filled in, returns a
// number (waiting for rates to have two scrapes inside their window).
void ExpectNumbersFromEveryQuery(PrometheusServer& prometheus, const Json& dashboard,
                                 const std::map<std::string, std::string>& variables) {
  for (const Expression& expression : Expressions(dashboard)) {
    const std::string promql = absl::StrReplaceAll(expression.expr, variables);
    ASSERT_THAT(promql, ::testing::Not(HasSubstr("$")))
        << expression.panel << ": a variable this test does not know";
    absl::StatusOr<Json> data;
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    do {
      data = prometheus.Query(promql);
      if (!data.ok() || HasANumber(*data)) break;
      absl::SleepFor(absl::Milliseconds(250));
    } while (absl::Now() < deadline);
    if (!data.ok()) {
      ADD_FAILURE() << expression.panel << ": " << data.status();
      continue;
    }
    EXPECT_TRUE(HasANumber(*data)) << expression.panel << ": no number from\n  " << promql
                                   << "\n  answer: " << data->dump();
  }
}

TEST(GrafanaDashboardTest, EveryQueryReturnsNumbersFromARunningMemd) {
  if (!PrometheusServer::Installed()) {
    GTEST_SKIP() << PrometheusServer::kBinary << " is missing: tools/dev installs the "
                 << "Debian package 'prometheus'; install it to run this test";
  }
  const Json dashboard = LoadDashboard();
  // On the fake CUDA driver: the GPU panels need a GPU.
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  auto daemon = DaemonProcess::Start(
      {"--max-buffers", "4", "--backend", "cuda", "--cuda-driver", MEMD_FAKE_CUDA_PATH});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto client = Client::Connect({.socket_dir = (*daemon)->socket_dir()});
  ASSERT_TRUE(client.ok());
  // Standing state: a sealed buffer, one being written, one unlinked but
  // leased; the traffic takes the fourth slot and is refused a fifth.
  auto sealed = (*client)->Create("sealed", 1 << 20);
  ASSERT_TRUE(sealed.ok());
  ASSERT_TRUE(sealed->Seal().ok());
  auto creating = (*client)->Create("creating", 4096);
  ASSERT_TRUE(creating.ok());
  auto gone = (*client)->Create("gone", 4096);
  ASSERT_TRUE(gone.ok());
  ASSERT_TRUE((*client)->Unlink("gone").ok());
  auto traffic_client = Client::Connect({.socket_dir = (*daemon)->socket_dir()});
  ASSERT_TRUE(traffic_client.ok());
  Traffic traffic(std::move(*traffic_client));

  // Scraped twice: by the shipped configuration (its relabelling names the
  // node by its host alone) and by a plain job without relabelling, whose
  // node is host:port. Each node, picked alone, must fill every panel.
  const std::string target = (*client)->Stats()->metrics_address;
  auto prometheus = PrometheusServer::Start(target, absl::Seconds(60), "memd-plain");
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  ASSERT_TRUE((*prometheus)->AwaitData("up{job=\"memd\"} == 1").ok()) << (*prometheus)->Log();
  ASSERT_TRUE((*prometheus)->AwaitData("up{job=\"memd-plain\"} == 1").ok())
      << (*prometheus)->Log();

  // Filled in as Grafana would: the variables from their own queries, the
  // rate window as $__rate_interval comes out for a 1 s scrape interval.
  std::map<std::string, std::string> variables = {{"$__rate_interval", "1m"}};
  const std::vector<std::string> nodes =
      VariableValues(**prometheus, Variable(dashboard, "node"), variables);
  EXPECT_THAT(nodes, Contains("127.0.0.1"));
  EXPECT_THAT(nodes, Contains(target));
  for (const std::string& node : {std::string("127.0.0.1"), target}) {
    SCOPED_TRACE(absl::StrCat("node ", node));
    variables["$node"] = RegexOf({node});
    const std::vector<std::string> locations =
        VariableValues(**prometheus, Variable(dashboard, "location"), variables);
    EXPECT_THAT(locations, Contains("host"));
    variables["$location"] = RegexOf(locations);
    ExpectNumbersFromEveryQuery(**prometheus, dashboard, variables);
  }
}

}  // namespace
}  // namespace memd
