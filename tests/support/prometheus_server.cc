#include "tests/support/prometheus_server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "tests/support/files.h"
#include "tests/support/http_get.h"

namespace memd::test {

bool PrometheusServer::Installed() { return ::access(kBinary, X_OK) == 0; }

absl::StatusOr<std::unique_ptr<PrometheusServer>> PrometheusServer::Start(
    const std::string& target, absl::Duration timeout, const std::string& plain_job) {
  std::unique_ptr<PrometheusServer> server(new PrometheusServer);
  // The shipped configuration, aimed at this memd and scraping every second.
  std::string config = ReadWholeFile(MEMD_SOURCE_DIR "/deploy/prometheus/prometheus.yml");
  if (config.empty()) {
    return absl::InternalError("cannot read deploy/prometheus/prometheus.yml");
  }
  config = absl::StrReplaceAll(config, {{"127.0.0.1:9477", target},
                                        {"scrape_interval: 15s", "scrape_interval: 1s"}});
  if (!plain_job.empty()) {
    // scrape_configs is the file's last section.
    absl::StrAppend(&config, "  - job_name: ", plain_job, "\n    static_configs:\n",
                    "      - targets: ['", target, "']\n");
  }
  const std::string config_path = server->dir_.Join("prometheus.yml");
  WriteWholeFile(config_path, config);
  const int port = FreeLoopbackPort();
  server->address_ = absl::StrCat("127.0.0.1:", port);

  const std::string log_path = server->dir_.Join("prometheus.log");
  const std::string data = server->dir_.Join("data");
  std::vector<std::string> args = {
      kBinary, "--config.file=" + config_path, "--storage.tsdb.path=" + data,
      "--web.listen-address=" + server->address_, "--log.level=warn"};
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  server->pid_ = pid;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    auto ready = HttpGet(server->address_, "/-/ready");
    if (ready.ok() && ready->status == 200) return server;
    int status;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      server->pid_ = -1;
      return absl::InternalError(
          absl::StrCat("prometheus exited during start-up:\n", server->Log()));
    }
    absl::SleepFor(absl::Milliseconds(50));  // Polling an external server.
  }
  return absl::InternalError(
      absl::StrCat("prometheus was not ready in time:\n", server->Log()));
}

PrometheusServer::~PrometheusServer() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

absl::StatusOr<nlohmann::json> PrometheusServer::Query(const std::string& promql) {
  auto response = HttpGet(address_, "/api/v1/query?query=" + UrlEncode(promql));
  if (!response.ok()) return response.status();
  nlohmann::json json = nlohmann::json::parse(response->body, nullptr, false);
  if (json.is_discarded() || !json.contains("status")) {
    return absl::DataLossError(absl::StrCat("not a Prometheus answer: ", response->body));
  }
  if (json["status"] != "success") {
    return absl::InvalidArgumentError(absl::StrCat(
        promql, ": ", json.value("errorType", ""), ": ", json.value("error", "")));
  }
  return json["data"];
}

absl::Status PrometheusServer::AwaitData(const std::string& promql,
                                         absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::DeadlineExceededError("no answer yet");
  while (absl::Now() < deadline) {
    auto data = Query(promql);
    if (data.ok() && !(*data)["result"].empty()) return absl::OkStatus();
    if (!data.ok()) last = data.status();
    if (absl::IsInvalidArgument(last)) return last;  // Will never parse.
    absl::SleepFor(absl::Milliseconds(100));  // Waiting for a scrape.
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no data for ", promql, " within ", absl::FormatDuration(timeout),
                   " (", last.message(), ")\n", Log()));
}

std::string PrometheusServer::Log() const { return ReadWholeFile(dir_.Join("prometheus.log")); }

}  // namespace memd::test
