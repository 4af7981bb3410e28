#pragma once

#include <cstddef>
#include <cstdint>

namespace memd::transfer {

// How a copy writes its destination.
enum class Stores {
  // memcpy: the destination passes through the CPU caches, which first read
  // every line they are about to overwrite.
  kCached,
  // Non-temporal stores that bypass the caches: no read of the old bytes, no
  // eviction of what the caches hold. For large destinations nobody reads
  // soon, such as a client's buffer filled from the staging ring (d2h): on
  // the first H100 host they drained the ring 1.8x faster than memcpy with
  // one thread (docs/benchmarks.md). Falls back to memcpy off x86-64.
  kStreaming,
};

// memcpy(destination, source, bytes) with non-temporal stores, ordered
// (sfence) before it returns, so that whoever the caller tells next sees
// the bytes. Any alignment and size. Thread-safe (touches only its
// arguments).
void StreamingCopy(std::byte* destination, const std::byte* source, std::uint64_t bytes);

// The copy `stores` asks for.
void CopyWith(Stores stores, std::byte* destination, const std::byte* source,
                     std::uint64_t bytes);

}  // namespace memd::transfer
