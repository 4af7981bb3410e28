#pragma once

#include "daemon/transfer/copy_threads.h"
#include "daemon/transfer/engine_core.h"
#include "daemon/transfer/lane.h"

namespace memd::transfer {

/// Host-to-host copies: one progress thread moving one chunk at a time
/// with CPU copies (split across copy threads), choosing the transfer at
/// each chunk boundary like the device lanes do, so a critical copy waits
/// at most one chunk. Owns its thread and copy threads. Thread-safe (Lane).
class HostLane : public Lane {
 public:
  HostLane(EngineCore& core, int copy_threads) : core_(core), copy_(copy_threads) {}
  ~HostLane() override { Stop(); }

 protected:
  void Run() override;

 private:
  EngineCore& core_;
  CopyThreads copy_;
};

}  // namespace memd::transfer
