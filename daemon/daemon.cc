#include "daemon/daemon.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/clock.h"
#include "common/cpus.h"
#include "common/errno_status.h"
#include "common/location.h"
#include "common/paths.h"
#include "common/status_macros.h"
#include "common/unix_socket.h"
#include "common/version.h"
#include "daemon/backend/factory.h"
#include "daemon/descriptor_budget.h"
#include "daemon/durability.h"
#include "daemon/broker/broker.h"
#include "daemon/memory_budget.h"
#include "daemon/metrics/daemon_collectable.h"
#include "daemon/metrics/metrics_server.h"
#include "daemon/metrics/rpc_metrics.h"
#include "daemon/placement_capacity.h"
#include "daemon/pool/pool_set.h"
#include "daemon/pool/carving_pool.h"
#include "daemon/pool/periodic_trimmer.h"
#include "daemon/pool/trace_format.h"
#include "daemon/pool/tracing_pool.h"
#include "daemon/service/memd_service.h"
#include "daemon/service/replica_copier.h"
#include "daemon/session/rate_limited_log.h"
#include "daemon/session/session_ender.h"
#include "daemon/session/session_server.h"
#include "daemon/session/token_digest.h"
#include "daemon/socket_dir.h"
#include "daemon/transfer/engine.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/server_posix.h"
#include "spdlog/spdlog.h"

namespace memd {

// Hands the control connections the session server accepts to gRPC, until
// the server shuts down.
class ControlHandOff {
 public:
  void Open(grpc::Server* server) {
    absl::MutexLock lock(&mu_);
    server_ = server;
  }
  void Close() {
    absl::MutexLock lock(&mu_);
    server_ = nullptr;
  }
  void Take(UniqueFd connection) {
    absl::MutexLock lock(&mu_);
    if (server_ != nullptr) grpc::AddInsecureChannelFromFd(server_, connection.release());
  }

 private:
  absl::Mutex mu_;
  grpc::Server* server_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// Declared in the order they start; destroyed in reverse.
struct Daemon::Parts {
  RealClock clock;
  std::string socket_dir_path;
  std::unique_ptr<SocketDir> socket_dir;
  std::unique_ptr<backend::Backend> backend;
  std::string backend_name;
  // What location auto reads of free memory; the broker borrows it.
  std::unique_ptr<PlacementCapacity> capacity;
  std::shared_ptr<pool::TraceWriter> trace;  // When --trace-file is set.
  // The pools report their segments to it: it goes after them.
  std::unique_ptr<Durability> durability;
  pool::PoolSet pools;
  std::unique_ptr<pool::PeriodicTrimmer> trimmer;
  // Holds segments of the pools while copies run: goes before them.
  std::unique_ptr<transfer::Engine> engine;
  std::unique_ptr<broker::Broker> broker;
  // Makes the broker's replica copies with the engine; goes after the
  // engine (whose end reports each copy's end to it) and before the broker.
  std::unique_ptr<service::EngineReplicaCopier> copier;
  std::uint64_t descriptor_limit = 0;  // RLIMIT_NOFILE, raised at start.
  ControlHandOff control;
  // Ends sessions (their transfers, then their leases: the service's
  // EndSession) off the session server's thread. No session ends before the
  // service exists: sessions start after it.
  std::unique_ptr<session::SessionEnder> ender;
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

// A RateLimitedLog that any thread may write to (the broker's pressure log
// runs on whichever thread's call made room).
class LockedLog {
 public:
  void Warn(const std::string& line) {
    absl::MutexLock lock(&mu_);
    log_.Warn(absl::Now(), line);
  }

 private:
  absl::Mutex mu_;
  session::RateLimitedLog log_ ABSL_GUARDED_BY(mu_);
};

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

// The descriptor-consuming limits `config` asks for.
DescriptorCaps CapsOf(const Config& config) {
  return {.max_sessions = config.max_sessions,
          .max_sessions_per_uid = config.max_sessions_per_uid,
          .max_connections = config.max_connections,
          .max_connections_per_uid = config.max_connections_per_uid,
          .max_fds_in_flight_per_session = config.max_fds_in_flight_per_session};
}

// What `descriptor_limit` (RLIMIT_NOFILE) lets memd run with of the limits
// `config` asks for, each cap lowered logged with the reason: as a warning
// when the operator chose a cap that was lowered, else (memd's defaults,
// which a shell's limit lowers on every start) at debug. Errors:
// FAILED_PRECONDITION (too small a limit).
absl::StatusOr<DescriptorCaps> DescriptorCapsOf(const Config& config,
                                                std::uint64_t descriptor_limit) {
  const DescriptorCaps configured = CapsOf(config);
  MEMD_ASSIGN_OR_RETURN(DescriptorBudget budget,
                        BudgetDescriptors(configured, descriptor_limit));
  const bool chosen = LoweredAChosenCap(configured, CapsOf(Config{}), budget.caps);
  for (const std::string& line : budget.lowered) {
    if (chosen) {
      spdlog::warn("descriptor budget: {}", line);
    } else {
      spdlog::debug("descriptor budget: {} (memd's default, not configured)", line);
    }
  }
  return budget.caps;
}

// `config` has passed ParseConfig, which checked the quotas parse; `caps`
// are its descriptor limits as the budget allows them.
broker::BrokerLimits LimitsOf(const Config& config, const DescriptorCaps& caps) {
  broker::BrokerLimits limits;
  limits.max_buffer_bytes = config.max_buffer_bytes;
  limits.max_buffers = config.max_buffers;
  limits.max_sessions = caps.max_sessions;
  limits.max_leases_per_session = config.max_leases_per_session;
  limits.max_waits_per_session = config.max_waits_per_session;
  limits.max_sessions_per_uid = caps.max_sessions_per_uid;
  limits.max_buffers_per_uid = config.max_buffers_per_uid;
  limits.max_leases_per_uid = config.max_leases_per_uid;
  limits.max_waits_per_uid = config.max_waits_per_uid;
  limits.max_waits = config.max_waits;
  limits.max_uid_bytes = broker::Quota::Parse(config.max_uid_bytes).value_or(broker::Quota());
  limits.max_session_bytes =
      broker::Quota::Parse(config.max_session_bytes).value_or(broker::Quota());
  return limits;
}

// `config` has passed ParseConfig, which checked that placement parses.
broker::PlacementRules PlacementRulesOf(const Config& config) {
  return broker::PlacementRules::Parse(config.placement).value_or(broker::PlacementRules());
}

// `config` has passed ParseConfig, which checked that numa parses. Pinned
// memory serves the backend's first GPU (CUDA registers it with device 0's
// context, PORTABLE for the others): auto places it on that GPU's node.
std::shared_ptr<const broker::NumaPlacement> NumaPlacementOf(const Config& config,
                                                            const backend::Backend& backend) {
  broker::NumaPlacement::Options options;
  options.daemon_default = broker::ParseNumaRequest(config.numa).value_or(broker::NumaRequest{
      broker::NumaRequest::Kind::kOff, -1});
  options.sysfs_root = config.numa_sysfs_root;
  const std::vector<backend::DeviceInfo> devices = backend.devices();
  if (!devices.empty()) options.gpu_pci_address = devices.front().pci_address;
  auto placement = std::make_shared<const broker::NumaPlacement>(std::move(options));
  spdlog::info("{}", placement->Describe());
  return placement;
}

// How long a session's end waits for its transfers' chunks on the GPUs
// before its leases go anyway; and how many sessions may be ending at once.
constexpr absl::Duration kSessionDrain = absl::Seconds(5);
constexpr int kSessionEnders = 4;

template <typename T>
T Clamped(std::uint64_t value, T most) {
  return static_cast<T>(std::min<std::uint64_t>(value, static_cast<std::uint64_t>(most)));
}

// Counts beyond what the engine takes are clamped here and refused by
// Engine::Start with the numbers.
transfer::EngineOptions EngineOptionsOf(const Config& config) {
  transfer::EngineOptions options;
  options.chunk_bytes = config.transfer_chunk_bytes;
  options.slot_bytes = config.transfer_slot_bytes;
  options.staging_slots = Clamped(config.transfer_staging_slots, 1 << 20);
  options.copy_threads = config.transfer_copy_threads == 0
                             ? transfer::DefaultCopyThreads(UsableCpus())
                             : Clamped(config.transfer_copy_threads, 1 << 10);
  options.max_session_bytes = config.transfer_max_session_bytes;
  options.max_uid_bytes = config.transfer_max_uid_bytes;
  options.max_total_bytes = config.transfer_max_total_bytes;
  options.max_session_transfers = Clamped(config.transfer_max_session_transfers, 1 << 30);
  options.max_uid_transfers = Clamped(config.transfer_max_uid_transfers, 1 << 30);
  // A WaitTransfer call is a wait like an open's: the same bound per session.
  options.max_session_watches = Clamped(config.max_waits_per_session, 1 << 30);
  options.stall_timeout =
      absl::Seconds(Clamped(config.transfer_stall_timeout_seconds, std::int64_t{1} << 40));
  return options;
}

// The engine over every GPU the backend serves (none: host-to-host copies
// only), on the daemon's one clock.
absl::StatusOr<std::unique_ptr<transfer::Engine>> StartEngine(const Config& config,
                                                              backend::Backend& backend,
                                                              const Clock& clock) {
  auto devices = backend.CopyDevices();
  if (!devices.ok()) {
    return absl::Status(devices.status().code(),
                        absl::StrCat("the transfer engine cannot reach the GPUs: ",
                                     devices.status().message()));
  }
  const std::size_t count = devices->size();
  const transfer::EngineOptions options = EngineOptionsOf(config);
  auto engine = transfer::Engine::Start(std::move(*devices), options, clock);
  if (!engine.ok()) {
    return absl::Status(engine.status().code(),
                        absl::StrCat("the transfer engine did not start: ",
                                     engine.status().message()));
  }
  if (count == 0) {
    spdlog::info("transfer engine: host-to-host copies only (no GPU)");
  } else {
    spdlog::info(
        "transfer engine: {} GPU(s), each with {} pinned staging slots of {} and {} copy "
        "threads{}",
        count, config.transfer_staging_slots, FormatBytes(config.transfer_slot_bytes),
        options.copy_threads,
        config.transfer_copy_threads == 0
            ? absl::StrCat(" (half the ", UsableCpus(), " CPUs memd may run on, 2 to 8)")
            : "");
  }
  return engine;
}

session::ConnectionLimits ConnectionLimitsOf(const DescriptorCaps& caps) {
  return session::ConnectionLimits{caps.max_connections_per_uid, caps.max_connections};
}

std::uint32_t FdsInFlightOf(const DescriptorCaps& caps) {
  return static_cast<std::uint32_t>(
      std::min<std::uint64_t>(caps.max_fds_in_flight_per_session, 1u << 20));
}

// The backend the configuration names (or finds, for auto), saying why it
// fell back when it did.
absl::StatusOr<std::unique_ptr<backend::Backend>> StartBackend(const Config& config) {
  std::string fallback;
  MEMD_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> backend,
                        backend::CreateBackend(
                            {config.backend, config.cuda_driver, config.cuda_handles,
                             config.level_zero_loader},
                            &fallback));
  if (!fallback.empty()) spdlog::info("{}", fallback);
  return backend;
}

// One pool per location the backend serves, each recording to `trace` when
// there is one.
pool::PoolSet MakePools(const Config& config, backend::Backend& backend,
                        const Clock& clock,
                        const std::shared_ptr<pool::TraceWriter>& trace,
                        pool::SegmentJournal* journal) {
  const MemoryBudget memory = AvailableMemory();
  if (config.host_pool_limit_bytes == 0 || config.pinned_pool_limit_bytes == 0) {
    spdlog::info("default host/pinned pool limits: half/a quarter of {} ({})",
                 FormatBytes(memory.bytes), memory.source);
  }
  pool::PoolSet pools;
  for (const Location& location : backend.locations()) {
    pool::CarvingPoolOptions options;
    options.limit_bytes = PoolLimit(config, location, backend, memory.bytes);
    options.small_max_bytes = config.pool_small_max_bytes;
    options.small_segment_bytes = config.pool_small_segment_bytes;
    options.large_round_bytes = config.pool_large_round_bytes;
    options.large_fit_slack = config.pool_large_fit_slack;
    options.idle_budget = config.pool_idle_budget;
    options.scrub_between_domains = config.pool_domain_reuse == "scrub";
    options.journal = journal;
    std::unique_ptr<pool::Pool> pool =
        std::make_unique<pool::CarvingPool>(backend, location, options, clock);
    if (trace != nullptr) pool = std::make_unique<pool::TracingPool>(std::move(pool), trace);
    pools.Add(std::move(pool));
  }
  return pools;
}

// The session server over both sockets of the directory. memd accepts the
// control socket's connections itself, so that it knows the credentials of
// each (gRPC's own listener would not tell), and hands them to `control`.
absl::StatusOr<std::unique_ptr<session::SessionServer>> MakeSessionServer(
    const Config& config, const DescriptorCaps& caps, SocketDir& socket_dir,
    broker::Broker& broker, session::SessionEnder& ender, ControlHandOff& control,
    std::unique_ptr<service::MemdService>* service) {
  MEMD_ASSIGN_OR_RETURN(UniqueFd listener,
                        socket_dir.Listen(kSessionSocketName, SOCK_SEQPACKET,
                                          config.socket_mode));
  MEMD_ASSIGN_OR_RETURN(UniqueFd control_listener,
                        socket_dir.Listen(kControlSocketName, SOCK_STREAM,
                                          config.socket_mode));
  return std::make_unique<session::SessionServer>(
      std::move(listener), std::move(control_listener),
      session::SessionHooks{
          [&broker](const PeerCredentials& peer, const std::string& command,
                    const std::string& token) {
            return broker.StartSession(peer, command, session::TokenDigest(token));
          },
          [&ender](std::uint64_t id) { ender.End(id); },
          [&control](UniqueFd connection) { control.Take(std::move(connection)); },
          // Made after the server, before it starts; gone after it stops.
          [service](session::Session& session, const SessionCall& call) {
            if (*service != nullptr) (*service)->HandleSessionCall(session, call);
          }},
      session::SessionServerOptions{FdsInFlightOf(caps), ConnectionLimitsOf(caps)});
}

// The /metrics endpoint: the daemon's state at each scrape, and `rpc`'s
// per-call figures.
absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> StartMetrics(
    const std::string& address, pool::PoolSet& pools, broker::Broker& broker,
    const transfer::Engine& engine, const backend::Backend& backend,
    durable::DurabilityStatus durability, metrics::RpcMetrics& rpc) {
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables = {
      std::make_shared<metrics::DaemonCollectable>(pools, broker, &engine, kVersion,
                                                   std::string(backend.name()),
                                                   std::move(durability), &backend),
      rpc.registry()};
  return metrics::MetricsServer::Start(address, std::move(collectables));
}

}  // namespace

Daemon::Daemon(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

std::vector<std::string> Daemon::Reload(const Config& config) {
  if (parts_->stopped) return {};
  // Cannot fail: the limit passed the same check at start.
  absl::StatusOr<DescriptorCaps> caps = DescriptorCapsOf(config, parts_->descriptor_limit);
  if (!caps.ok()) {
    spdlog::error("reload: {}", caps.status().ToString());
    return {};
  }
  parts_->broker->SetLimits(LimitsOf(config, *caps));
  parts_->broker->SetPlacementRules(PlacementRulesOf(config));
  // Cannot fail: the config takes positive counts only.
  (void)parts_->engine->SetMaxSessionWatches(EngineOptionsOf(config).max_session_watches);
  parts_->sessions->SetLimits(FdsInFlightOf(*caps), ConnectionLimitsOf(*caps));
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

// Starts the parts in the order Parts declares them: each may use those
// before it.
absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const Config& config) {
  auto parts = std::make_unique<Parts>();
  // First, so that a limit too small to serve anyone stops memd before it
  // claims the socket directory or any memory.
  parts->descriptor_limit = RaiseDescriptorLimit();
  MEMD_ASSIGN_OR_RETURN(const DescriptorCaps caps,
                        DescriptorCapsOf(config, parts->descriptor_limit));
  parts->socket_dir_path =
      config.socket_dir.empty() ? DefaultSocketDir() : config.socket_dir;
  MEMD_ASSIGN_OR_RETURN(parts->socket_dir, SocketDir::Claim(parts->socket_dir_path));
  MEMD_ASSIGN_OR_RETURN(parts->backend, StartBackend(config));
  parts->backend_name = std::string(parts->backend->name());
  if (!config.trace_file.empty()) {
    MEMD_ASSIGN_OR_RETURN(parts->trace, pool::TraceWriter::Create(config.trace_file));
    spdlog::info("recording pool allocations to {}", config.trace_file);
  }
  parts->durability = Durability::Prepare(config, *parts->backend);
  parts->pools = MakePools(config, *parts->backend, parts->clock, parts->trace,
                           parts->durability->segment_journal());
  const absl::Duration idle = absl::Seconds(config.pool_trim_idle_seconds);
  parts->trimmer = std::make_unique<pool::PeriodicTrimmer>(
      parts->pools, idle, std::min(idle / 4, absl::Seconds(1)));

  MEMD_ASSIGN_OR_RETURN(parts->engine, StartEngine(config, *parts->backend, parts->clock));

  parts->broker =
      std::make_unique<broker::Broker>(parts->pools, LimitsOf(config, caps), parts->clock);
  parts->capacity = std::make_unique<PlacementCapacity>(*parts->backend);
  parts->broker->SetCapacitySource(parts->capacity.get());
  parts->broker->SetPlacementRules(PlacementRulesOf(config));
  parts->broker->SetNumaPlacement(NumaPlacementOf(config, *parts->backend));
  // Nobody can read a buffer freed while copies still write it: they stop.
  parts->broker->SetFreedWhileWritten(
      [engine = parts->engine.get()](broker::BufferId id) { engine->CancelWritesTo(id); });
  // What memory pressure takes is logged, at most a line a second: a client
  // filling a location must not fill the disk too.
  parts->broker->SetPressureLog(
      [log = std::make_shared<LockedLog>()](const std::string& line) { log->Warn(line); });
  parts->copier = std::make_unique<service::EngineReplicaCopier>(*parts->engine);
  parts->broker->SetReplicaCopier(parts->copier.get());
  // Before anyone is served: what the previous memd left comes back first.
  parts->durability->Recover(*parts->backend, parts->pools, *parts->broker, parts->clock);
  parts->ender = std::make_unique<session::SessionEnder>(
      [service = &parts->service](std::uint64_t id) {
        (*service)->EndSession(id, kSessionDrain);
      },
      kSessionEnders);
  MEMD_ASSIGN_OR_RETURN(parts->sessions,
                        MakeSessionServer(config, caps, *parts->socket_dir,
                                          *parts->broker, *parts->ender, parts->control,
                                          &parts->service));
  // A client that keeps its import of a device buffer lets go once told
  // that memd freed it; one that does not read its socket is not told.
  parts->broker->SetFreedNotice(
      [sessions = parts->sessions.get()](broker::SessionId id,
                                         const std::vector<broker::BufferId>& freed) {
        if (std::shared_ptr<session::Session> session = sessions->FindById(id)) {
          absl::Status sent = session->SendFreed(freed);
          if (!sent.ok()) spdlog::debug("freed notice to session {}: {}", id, sent.ToString());
        }
      });
  if (!config.metrics_address.empty()) {
    parts->rpc_metrics =
        std::make_unique<metrics::RpcMetrics>(service::MemdService::MethodNames());
    MEMD_ASSIGN_OR_RETURN(parts->metrics,
                          StartMetrics(config.metrics_address, parts->pools,
                                       *parts->broker, *parts->engine, *parts->backend,
                                       parts->durability->status(), *parts->rpc_metrics));
    parts->metrics_address = parts->metrics->address();
  }

  parts->service = std::make_unique<service::MemdService>(
      *parts->broker, parts->pools, *parts->sessions,
      service::DaemonInfo{kVersion, parts->backend_name, parts->metrics_address,
                          parts->clock.Now(), parts->durability->status()},
      parts->backend.get(), parts->rpc_metrics.get(), parts->engine.get());
  grpc::ServerBuilder builder;
  builder.RegisterService(parts->service.get());
  parts->server = builder.BuildAndStart();
  if (parts->server == nullptr) {
    return absl::UnavailableError("the gRPC server did not start");
  }
  parts->control.Open(parts->server.get());
  MEMD_RETURN_IF_ERROR(parts->sessions->Start());
  parts->durability->StartGrace(*parts->broker, absl::Seconds(config.recovery_grace_seconds));
  parts->started_with = config;
  return std::unique_ptr<Daemon>(new Daemon(std::move(parts)));
}

std::vector<durable::PassedFd> Daemon::HandOff() {
  parts_->control.Close();
  parts_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  return parts_->durability->HandOff();
}

void Daemon::Shutdown() {
  if (parts_ == nullptr || parts_->stopped) return;
  parts_->stopped = true;
  // What this shutdown gives back stays in the durable state: the next
  // memd takes it back (or the service manager, stopping memd, drops it).
  parts_->durability->Detach();
  // Calls first (waiting opens are cancelled), then sessions (their leases
  // go back), then memory; the socket directory is cleaned last.
  parts_->control.Close();
  parts_->server->Shutdown(std::chrono::system_clock::now() +
                           std::chrono::milliseconds(500));
  spdlog::debug("shutdown: grpc server stopped");

  parts_->server.reset();
  parts_->sessions->Stop();
  parts_->ender->Stop();  // The ends Stop queued: transfers, then leases.
  parts_->broker->SetFreedNotice(nullptr);  // It names the sessions.
  spdlog::debug("shutdown: sessions ended");
  parts_->metrics.reset();
  spdlog::debug("shutdown: metrics stopped");
  parts_->service.reset();
  parts_->sessions.reset();
  parts_->ender.reset();
  parts_->broker->SetFreedWhileWritten(nullptr);  // It names the engine.
  parts_->broker->SetReplicaCopier(nullptr);      // So does this.
  parts_->engine.reset();  // Cancels what is left and waits for the GPUs.
  parts_->copier.reset();  // Ends the fills the engine's end reported.
  parts_->broker.reset();
  parts_->trimmer.reset();
  parts_->pools = pool::PoolSet();
  parts_->durability.reset();
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
