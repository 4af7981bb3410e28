#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/transfer/engine_types.h"

namespace memd::transfer {

/// The callbacks waiting for transfers to end (Engine::Watch), by token and
/// by transfer, and how many each session has waiting. Thread-compatible: the engine calls it under its mutex and
/// runs what Take returns after releasing it.
class WatchList {
 public:
  struct Entry {
    std::uint64_t token = 0;
    TransferDone done;
  };

  // A token no watch ever had: for a transfer that had already ended.
  std::uint64_t NewToken() { return next_token_++; }
  std::uint64_t Add(SessionId session, TransferId transfer, TransferDone done);
  // False when `token` is not waiting (ran, running or unknown).
  bool Remove(std::uint64_t token);
  // The watches of `transfer`, forgotten here.
  std::vector<Entry> Take(TransferId transfer);
  // Watches waiting now.
  int of_session(SessionId session) const;

 private:
  struct Waiting {
    TransferId transfer = 0;
    SessionId session = 0;
  };
  void Forget(const Waiting& waiting);

  std::uint64_t next_token_ = 1;
  absl::flat_hash_map<std::uint64_t, Waiting> waiting_;  // By token.
  absl::flat_hash_map<TransferId, std::vector<Entry>> entries_;
  absl::flat_hash_map<SessionId, int> sessions_;  // Those with any.
};

}  // namespace memd::transfer
