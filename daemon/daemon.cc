#include "daemon/daemon.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/clock.h"
#include "common/errno_status.h"
#include "common/location.h"
#include "common/paths.h"
#include "common/status_macros.h"
#include "common/unix_socket.h"
#include "common/version.h"
#include "daemon/backend/factory.h"
#include "daemon/broker/broker.h"
#include "daemon/memory_budget.h"
#include "daemon/metrics/daemon_collectable.h"
#include "daemon/metrics/metrics_server.h"
#include "daemon/metrics/rpc_metrics.h"
#include "daemon/pool/pool_set.h"
#include "daemon/pool/carving_pool.h"
#include "daemon/pool/periodic_trimmer.h"
#include "daemon/pool/trace_format.h"
#include "daemon/pool/tracing_pool.h"
#include "daemon/service/memd_service.h"
#include "daemon/session/session_server.h"
#include "daemon/socket_dir.h"
#include "grpcpp/grpcpp.h"
#include "spdlog/spdlog.h"

namespace memd {

// Declared in the order they start; destroyed in reverse.
struct Daemon::Parts {
  RealClock clock;
  std::string socket_dir_path;
  std::unique_ptr<SocketDir> socket_dir;
  std::unique_ptr<backend::Backend> backend;
  std::string backend_name;
  std::shared_ptr<pool::TraceWriter> trace;  // When --trace-file is set.
  pool::PoolSet pools;
  std::unique_ptr<pool::PeriodicTrimmer> trimmer;
  std::unique_ptr<broker::Broker> broker;
  std::unique_ptr<session::SessionServer> sessions;
  std::unique_ptr<metrics::RpcMetrics> rpc_metrics;
  std::unique_ptr<service::MemdService> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<metrics::MetricsServer> metrics;
  std::string metrics_address;
  Config started_with;  // What the pools, sockets and backend run with.
  bool stopped = false;
};

namespace {

// `memory`: what memd may use (AvailableMemory), for the host and pinned
// defaults.
std::uint64_t PoolLimit(const Config& config, const Location& location,
                        const backend::Backend& backend, std::uint64_t memory) {
  if (location.kind == Location::Kind::kDevice) {
    if (config.device_pool_limit_bytes) return config.device_pool_limit_bytes;
    for (const backend::DeviceInfo& device : backend.devices()) {
      // Leave some for the driver and for processes that allocate on their
      // own.
      if (device.ordinal == location.device) return device.total_bytes / 10 * 9;
    }
    return 0;
  }
  if (location.kind == Location::Kind::kPinned) {
    return config.pinned_pool_limit_bytes ? config.pinned_pool_limit_bytes
                                          : memory / 4;
  }
  return config.host_pool_limit_bytes ? config.host_pool_limit_bytes : memory / 2;
}

// gRPC creates its socket with the process umask; give it the configured
// mode like the session socket.
absl::Status ChmodSocket(const std::string& path, std::uint32_t mode) {
  if (::chmod(path.c_str(), mode) != 0) {
    return ErrnoStatus(absl::StrCat("chmod ", path), errno);
  }
  return absl::OkStatus();
}

// `config` has passed ParseConfig, which checked the quotas parse.
broker::BrokerLimits LimitsOf(const Config& config) {
  broker::BrokerLimits limits;
  limits.max_buffer_bytes = config.max_buffer_bytes;
  limits.max_buffers = config.max_buffers;
  limits.max_sessions = config.max_sessions;
  limits.max_leases_per_session = config.max_leases_per_session;
  limits.max_waits_per_session = config.max_waits_per_session;
  limits.max_uid_bytes = broker::Quota::Parse(config.max_uid_bytes).value_or(broker::Quota());
  limits.max_session_bytes =
      broker::Quota::Parse(config.max_session_bytes).value_or(broker::Quota());
  return limits;
}

}  // namespace

Daemon::Daemon(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

std::vector<std::string> Daemon::Reload(const Config& config) {
  if (parts_->stopped) return {};
  parts_->broker->SetLimits(LimitsOf(config));
  // Compared with what runs, not with the file read at the last reload.
  return SettingsNeedingRestart(parts_->started_with, config);
}

bool Daemon::Healthy() const {
  if (parts_->stopped) return false;
  // Takes the registry's lock: a deadlock there stops the pings.
  parts_->broker->Counts();
  return true;
}

Daemon::~Daemon() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const Config& config) {
  auto parts = std::make_unique<Parts>();
  const std::string dir =
      config.socket_dir.empty() ? DefaultSocketDir() : config.socket_dir;
  parts->socket_dir_path = dir;
  ASSIGN_OR_RETURN(parts->socket_dir, SocketDir::Claim(dir));

  std::string fallback;
  ASSIGN_OR_RETURN(parts->backend,
                   backend::CreateBackend(
                       {config.backend, config.cuda_driver, config.cuda_handles},
                       &fallback));
  if (!fallback.empty()) spdlog::info("{}", fallback);
  parts->backend_name = std::string(parts->backend->name());
  if (!config.trace_file.empty()) {
    ASSIGN_OR_RETURN(parts->trace, pool::TraceWriter::Create(config.trace_file));
    spdlog::info("recording pool allocations to {}", config.trace_file);
  }
  const MemoryBudget memory = AvailableMemory();
  if (config.host_pool_limit_bytes == 0 || config.pinned_pool_limit_bytes == 0) {
    spdlog::info("default host/pinned pool limits: half/a quarter of {} ({})",
                 FormatBytes(memory.bytes), memory.source);
  }
  for (const Location& location : parts->backend->locations()) {
    pool::CarvingPoolOptions options;
    options.limit_bytes = PoolLimit(config, location, *parts->backend, memory.bytes);
    options.small_max_bytes = config.pool_small_max_bytes;
    options.small_segment_bytes = config.pool_small_segment_bytes;
    options.large_round_bytes = config.pool_large_round_bytes;
    options.large_fit_slack = config.pool_large_fit_slack;
    options.idle_budget = config.pool_idle_budget;
    options.scrub_between_domains = config.pool_domain_reuse == "scrub";
    std::unique_ptr<pool::Pool> pool = std::make_unique<pool::CarvingPool>(
        *parts->backend, location, options, parts->clock);
    if (parts->trace != nullptr) {
      pool = std::make_unique<pool::TracingPool>(std::move(pool), parts->trace);
    }
    parts->pools.Add(std::move(pool));
  }
  const absl::Duration idle = absl::Seconds(config.pool_trim_idle_seconds);
  parts->trimmer = std::make_unique<pool::PeriodicTrimmer>(
      parts->pools, idle, std::min(idle / 4, absl::Seconds(1)));

  parts->broker = std::make_unique<broker::Broker>(parts->pools, LimitsOf(config),
                                                   parts->clock);

  ASSIGN_OR_RETURN(UniqueFd listener,
                   parts->socket_dir->Listen(kSessionSocketName, SOCK_SEQPACKET,
                                             config.socket_mode));
  broker::Broker& broker = *parts->broker;
  parts->sessions = std::make_unique<session::SessionServer>(
      std::move(listener),
      session::SessionHooks{
          [&broker](const PeerCredentials& peer, const std::string& command) {
            return broker.StartSession(peer, command);
          },
          [&broker](std::uint64_t id) { broker.EndSession(id); }});
  RETURN_IF_ERROR(parts->sessions->Start());

  if (!config.metrics_address.empty()) {
    parts->rpc_metrics = std::make_unique<metrics::RpcMetrics>();
    std::vector<std::shared_ptr<prometheus::Collectable>> collectables = {
        std::make_shared<metrics::DaemonCollectable>(parts->pools, *parts->broker,
                                                     kVersion, parts->backend_name),
        parts->rpc_metrics->registry()};
    ASSIGN_OR_RETURN(parts->metrics, metrics::MetricsServer::Start(
                                         config.metrics_address, std::move(collectables)));
    parts->metrics_address = parts->metrics->address();
  }

  parts->service = std::make_unique<service::MemdService>(
      *parts->broker, parts->pools, *parts->sessions,
      service::DaemonInfo{kVersion, parts->backend_name, parts->metrics_address,
                          parts->clock.Now()},
      parts->backend.get(), parts->rpc_metrics.get());
  const std::string control = ControlSocketPath(dir);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", control),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(parts->service.get());
  parts->server = builder.BuildAndStart();
  if (parts->server == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("gRPC could not listen on ", control));
  }
  RETURN_IF_ERROR(ChmodSocket(control, config.socket_mode));
  parts->started_with = config;
  return std::unique_ptr<Daemon>(new Daemon(std::move(parts)));
}

void Daemon::Shutdown() {
  if (parts_ == nullptr || parts_->stopped) return;
  parts_->stopped = true;
  // Calls first (waiting opens are cancelled), then sessions (their leases
  // go back), then memory; the socket directory is cleaned last.
  parts_->server->Shutdown(std::chrono::system_clock::now() +
                           std::chrono::milliseconds(500));
  spdlog::debug("shutdown: grpc server stopped");
  parts_->server.reset();
  parts_->sessions->Stop();
  spdlog::debug("shutdown: sessions ended");
  parts_->metrics.reset();
  spdlog::debug("shutdown: metrics stopped");
  parts_->service.reset();
  parts_->sessions.reset();
  parts_->broker.reset();
  parts_->trimmer.reset();
  parts_->pools = pool::PoolSet();
  if (parts_->trace != nullptr) {
    if (absl::Status flushed = parts_->trace->Flush(); !flushed.ok()) {
      spdlog::error("allocation trace incomplete: {}", flushed.ToString());
    }
    parts_->trace.reset();
  }
  parts_->backend.reset();
  parts_->socket_dir.reset();
}

const std::string& Daemon::socket_dir() const { return parts_->socket_dir_path; }
const std::string& Daemon::metrics_address() const { return parts_->metrics_address; }
const std::string& Daemon::backend_name() const { return parts_->backend_name; }

}  // namespace memd
