#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace memd {

// Everything memd can be told, from flags or the TOML file given by
// --config (flags win). deploy/memd.toml documents every key.
struct Config {
  std::string config_file;
  // Where memd.sock and session.sock live; empty means DefaultSocketDir().
  std::string socket_dir;
  // Permission bits of the two sockets: whoever may connect may use memd.
  std::uint32_t socket_mode = 0660;
  // HOST:PORT for Prometheus /metrics; port 0 picks a free port; empty
  // turns the endpoint off.
  std::string metrics_address = "127.0.0.1:9477";
  std::string backend = "auto";
  // The CUDA driver library (default: $MEMD_CUDA_DRIVER, else libcuda.so.1),
  // and how device memory is handed out: auto, vmm_fd, ipc.
  std::string cuda_driver;
  std::string cuda_handles = "auto";
  // The Level Zero loader (default: $MEMD_ZE_LOADER, else libze_loader.so.1).
  std::string level_zero_loader;
  std::string log_level = "info";
  // The largest single buffer.
  std::uint64_t max_buffer_bytes = std::uint64_t{64} << 30;
  // Most bytes the host pool reserves; 0 means half of the memory memd may
  // use (memory_budget.h).
  std::uint64_t host_pool_limit_bytes = 0;
  // Most bytes the pinned pool reserves; 0 means a quarter of it.
  std::uint64_t pinned_pool_limit_bytes = 0;
  // Most bytes each device pool reserves; 0 means 90% of the device.
  std::uint64_t device_pool_limit_bytes = 0;
  // NUMA placement (broker/numa_placement.h) of host and pinned buffers
  // whose create asks for none: "off", "auto" or a node number; and the
  // sysfs tree it reads nodes, CPUs and GPUs from. Read at start.
  std::string numa = "off";
  std::string numa_sysfs_root = "/sys";
  // Pool growth policy: requests up to pool_small_max_bytes are served by
  // size classes from segments of pool_small_segment_bytes; a larger request
  // that finds no free block reserves a segment of its size rounded up to
  // pool_large_round_bytes (0: the location's alignment).
  std::uint64_t pool_small_max_bytes = std::uint64_t{1} << 20;
  std::uint64_t pool_small_segment_bytes = std::uint64_t{2} << 20;
  std::uint64_t pool_large_round_bytes = 0;
  // A large request takes a free block at most this much larger (0.5 =
  // 50%); and before the pool grows it gives back idle segments until it
  // holds at most (1 + pool_idle_budget) x its peak use (negative: never).
  double pool_large_fit_slack = 0.5;
  double pool_idle_budget = 0.08;
  // Segments idle this long go back to the system.
  std::uint64_t pool_trim_idle_seconds = 60;
  // "never": memory stays with the owner/group/mode it first served;
  // "scrub": an idle segment may serve another after being zeroed (a client
  // that kept a mapping of it could then read what comes next).
  std::string pool_domain_reuse = "never";
  // Records every pool allocation and free as CSV (memd-replay reads it).
  std::string trace_file;
  // "auto": buffers outlive memd where a descriptor store is there to keep
  // them (systemd's: $NOTIFY_SOCKET with FileDescriptorStoreMax=);
  // "off": a restart frees every buffer (docs/design.md, "Durability").
  std::string durability = "auto";
  // After a recovery, how long the holders of adopted buffers that wait
  // for them (unsealed, ephemeral, unlinked) have to come back.
  std::uint64_t recovery_grace_seconds = 30;
  // Segments of one uid's memory kept in the descriptor store: a quarter of
  // the unit's FileDescriptorStoreMax=16384, so that one uid cannot fill it.
  std::uint64_t durable_segments_per_uid = 4096;
  std::uint64_t max_buffers = 65536;
  std::uint64_t max_sessions = 4096;
  std::uint64_t max_leases_per_session = 65536;
  std::uint64_t max_waits_per_session = 256;
  // Per uid (root included), so that one user cannot take what the global
  // limits leave for everybody: defaults a fraction of the global ones.
  // max_waits bounds waiting calls daemon-wide (opens waiting for a seal
  // and WaitTransfer calls: each holds a gRPC call).
  std::uint64_t max_sessions_per_uid = 256;
  std::uint64_t max_buffers_per_uid = 16384;
  std::uint64_t max_leases_per_uid = 65536;
  std::uint64_t max_waits_per_uid = 1024;
  std::uint64_t max_waits = 16384;
  // Descriptors a session may leave unread in its socket (each counts
  // against a kernel limit of memd's user), and connections to the control
  // socket per uid and in all.
  std::uint64_t max_fds_in_flight_per_session = 32;
  std::uint64_t max_connections_per_uid = 64;
  std::uint64_t max_connections = 1024;
  // Byte quotas (broker/quota.h): bytes of live buffers one uid may own, and
  // one session may have created, per location: "16GiB" everywhere, or
  // "host=16GiB,device=40GiB,device:1=8GiB"; empty: none.
  std::string max_uid_bytes;
  std::string max_session_bytes;
  // Automatic placement's tunables (broker::PlacementRules::Parse):
  // "small=64KiB,medium=16MiB,headroom=25%", any subset; empty: defaults.
  // Applied again on reload.
  std::string placement;
  // The transfer engine (transfer/engine.h, EngineOptions): the default
  // chunk and the staging slot size (the largest chunk a copy may ask
  // for), pinned staging slots per GPU (the ring depth) and the CPU threads
  // that fill and drain them, the bytes and transfers in flight one session,
  // one uid (all its sessions) and the daemon may have, and how long a
  // running copy may go without a finished chunk. Read at start.
  std::uint64_t transfer_chunk_bytes = std::uint64_t{4} << 20;
  std::uint64_t transfer_slot_bytes = std::uint64_t{16} << 20;
  std::uint64_t transfer_staging_slots = 4;
  std::uint64_t transfer_copy_threads = 0;  // 0: not set, transfer::DefaultCopyThreads.
  std::uint64_t transfer_max_session_bytes = std::uint64_t{64} << 30;
  std::uint64_t transfer_max_uid_bytes = std::uint64_t{64} << 30;
  std::uint64_t transfer_max_total_bytes = std::uint64_t{256} << 30;
  std::uint64_t transfer_max_session_transfers = 256;
  std::uint64_t transfer_max_uid_transfers = 1024;
  std::uint64_t transfer_stall_timeout_seconds = 30;
};

// What memd's command line asks for: to run with `config`, or (--help,
// --version) to print `text` and exit 0.
struct CommandLine {
  Config config;
  std::string text;  // Non-empty: print it instead of running.
};

// Parses the command line (argv[0] first) and the config file it names.
// Errors: INVALID_ARGUMENT with the message to print (unknown flag, bad
// value, unreadable or malformed file, unknown key).
absl::StatusOr<CommandLine> ParseCommandLine(int argc, const char* const* argv);

// The config of a command line that runs memd (a reload reads the one memd
// started with). Errors: as ParseCommandLine; --help and --version are
// INVALID_ARGUMENT here, since they ask for no config.
absl::StatusOr<Config> ParseConfig(int argc, const char* const* argv);

// memd's command line as ParseCommandLine declares it, never parsed: what
// tools/clidoc walks for memd's man page and shell completions.
std::unique_ptr<CLI::App> MakeCommandLineApp();

// The config-file key that an option of that App also is
// ("max_buffer_bytes" for --max-buffer-bytes), or empty (--config, --help,
// --version).
std::string ConfigKey(const CLI::Option& option);

// The settings (by their config-file keys) that differ between `running` and
// `next` but take effect only when memd restarts: everything except the log
// level, the max_* limits and placement, which SIGHUP applies.
std::vector<std::string> SettingsNeedingRestart(const Config& running,
                                                const Config& next);

}  // namespace memd
