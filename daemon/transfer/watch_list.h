#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/transfer/engine.h"

namespace memd::transfer {

/// The callbacks waiting for transfers to end (Engine::Watch), by token and
/// by transfer. Thread-compatible: the engine calls it under its mutex and
/// runs what Take returns after releasing it.
class WatchList {
 public:
  struct Entry {
    std::uint64_t token = 0;
    Engine::Done done;
  };

  // A token no watch ever had: for a transfer that had already ended.
  std::uint64_t NewToken() { return next_token_++; }
  std::uint64_t Add(TransferId transfer, Engine::Done done);
  // False when `token` is not waiting (ran, running or unknown).
  bool Remove(std::uint64_t token);
  // The watches of `transfer`, forgotten here.
  std::vector<Entry> Take(TransferId transfer);

 private:
  std::uint64_t next_token_ = 1;
  absl::flat_hash_map<std::uint64_t, TransferId> transfers_;  // By token.
  absl::flat_hash_map<TransferId, std::vector<Entry>> entries_;
};

}  // namespace memd::transfer
