#include "common/opaque_ids.h"

#include <sys/random.h>

namespace memd {
namespace {

constexpr int kHalfBits = OpaqueIds::kBits / 2;
constexpr std::uint64_t kHalfMask = (std::uint64_t{1} << kHalfBits) - 1;
constexpr std::uint64_t kMask = (std::uint64_t{1} << OpaqueIds::kBits) - 1;

// A round function: any function makes the Feistel network a bijection;
// one that mixes every input bit into every output bit makes its rounds
// hide the counter (the finaliser of SplitMix64).
std::uint64_t Round(std::uint64_t half, std::uint32_t key) {
  std::uint64_t x = half ^ (std::uint64_t{key} * 0x9e3779b97f4a7c15ull);
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x & kHalfMask;
}

std::array<std::uint32_t, 4> RandomKey() {
  std::array<std::uint32_t, 4> key{0x2545f491u, 0x9e3779b9u, 0x85ebca6bu, 0xc2b2ae35u};
  std::array<std::uint32_t, 4> drawn{};
  if (::getrandom(drawn.data(), sizeof(drawn), 0) == static_cast<ssize_t>(sizeof(drawn))) {
    key = drawn;
  }
  return key;
}

}  // namespace

OpaqueIds::OpaqueIds() : key_(RandomKey()) {}

std::uint64_t OpaqueIds::Permute(std::uint64_t counter) const {
  std::uint64_t left = (counter >> kHalfBits) & kHalfMask;
  std::uint64_t right = counter & kHalfMask;
  for (std::uint32_t key : key_) {
    const std::uint64_t next = left ^ Round(right, key);
    left = right;
    right = next;
  }
  return (left << kHalfBits) | right;
}

std::uint64_t OpaqueIds::Next() {
  for (;;) {
    // 2^52 ids: at a million a second, 142 years before the counter wraps.
    const std::uint64_t id = Permute(counter_++ & kMask);
    if (id != 0) return id;
  }
}

}  // namespace memd
