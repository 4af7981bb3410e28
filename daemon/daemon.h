#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/config.h"
#include "daemon/durable/handoff.h"

namespace memd {

/// A running memd, wired from a Config: socket directory claim, backend,
/// pools, broker, session socket, gRPC service and metrics endpoint. Owns all
/// of them. main() and in-process tests both start the daemon through it.
/// Thread-safe to query; Shutdown is for one thread.
class Daemon {
 public:
  // Errors: what any part returns while starting (FAILED_PRECONDITION for a
  // live daemon on the socket directory or an unusable backend, UNAVAILABLE
  // for a metrics address in use...).
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const Config& config);

  // Stops accepting calls and sessions, ends every session (releasing its
  // leases), frees all memory and removes the sockets. Idempotent; the
  // destructor calls it.
  void Shutdown();
  ~Daemon();

  // Applies what can change while running: the broker's limits. (The log
  // level is the process's, set by the caller.) Returns the settings that
  // changed from the running ones but wait for a restart.
  std::vector<std::string> Reload(const Config& config);

  // For an in-place upgrade (main.cc, SIGUSR2): stops taking calls and
  // sessions, lets the calls under way finish, and freezes the durable
  // state; returns the descriptors the next memd takes back (segments and
  // the state file), borrowed: valid while this daemon lives. Sessions are
  // not ended: their leases stay in the state, and their sockets close
  // when the process execs. Afterwards only the destructor is of use. Empty
  // when durability is off.
  std::vector<durable::PassedFd> HandOff();

  // Whether the daemon still answers: its registry is not wedged. For the
  // systemd watchdog.
  bool Healthy() const;

  const std::string& socket_dir() const;
  // HOST:PORT actually bound; empty when metrics are off.
  const std::string& metrics_address() const;
  const std::string& backend_name() const;

 private:
  struct Parts;
  explicit Daemon(std::unique_ptr<Parts> parts);

  std::unique_ptr<Parts> parts_;
};

}  // namespace memd
