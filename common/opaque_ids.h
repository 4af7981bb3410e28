#pragma once

#include <array>
#include <cstdint>

namespace memd {

/// Hands out ids that tell nothing of how many came before them. memd's ids
/// (sessions, buffers, leases, transfers) are what a client sees of other
/// clients' activity if they are counters: the next lease id would say how
/// many leases every other user took meanwhile. So each id is a counter
/// passed through a keyed permutation of [1, 2^52): unique by construction
/// (no table of ids in use), never 0, and below 2^53 so that JSON readers
/// that keep numbers as doubles read them exactly.
///
/// The permutation is a four-round Feistel network whose key is drawn from
/// the kernel's random source per sequence. It hides the order and spacing
/// of ids from a client that sees only its own; it is not a cryptographic
/// guarantee, and ids are never secrets: every lookup checks that the id is
/// the caller's own.
///
/// Thread-compatible: callers serialise Next() (each sequence sits under
/// its owner's mutex).
class OpaqueIds {
 public:
  // A sequence with a random key (getrandom; a fixed key only if the kernel
  // has no random source, which memd's supported kernels always have).
  OpaqueIds();
  // A fixed key, for tests that want the same ids every run.
  explicit OpaqueIds(std::array<std::uint32_t, 4> key) : key_(key) {}

  // The next id: never 0, never one handed out before by this sequence.
  std::uint64_t Next();

  // The permutation itself, exposed for tests: a bijection of [0, 2^52).
  std::uint64_t Permute(std::uint64_t counter) const;

  static constexpr int kBits = 52;

 private:
  std::array<std::uint32_t, 4> key_;
  std::uint64_t counter_ = 0;
};

}  // namespace memd
