#include "daemon/transfer/streaming_copy.h"

#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace memd::transfer {

void StreamingCopy(std::byte* destination, const std::byte* source, std::uint64_t bytes) {
#if defined(__x86_64__)
  // SSE2 is in every x86-64: no dispatch. 16-byte stores fill the
  // write-combining buffers as well as wider ones when memory is the limit.
  constexpr std::uint64_t kStore = 16;
  constexpr std::uint64_t kBlock = 4 * kStore;  // One cache line per turn.
  const auto misaligned = reinterpret_cast<std::uintptr_t>(destination) % kStore;
  std::uint64_t head = misaligned == 0 ? 0 : kStore - misaligned;
  if (head > bytes) head = bytes;
  std::memcpy(destination, source, head);
  std::uint64_t done = head;
  for (; bytes - done >= kBlock; done += kBlock) {
    const auto* from = reinterpret_cast<const __m128i*>(source + done);
    auto* to = reinterpret_cast<__m128i*>(destination + done);
    const __m128i a = _mm_loadu_si128(from);
    const __m128i b = _mm_loadu_si128(from + 1);
    const __m128i c = _mm_loadu_si128(from + 2);
    const __m128i d = _mm_loadu_si128(from + 3);
    _mm_stream_si128(to, a);
    _mm_stream_si128(to + 1, b);
    _mm_stream_si128(to + 2, c);
    _mm_stream_si128(to + 3, d);
  }
  std::memcpy(destination + done, source + done, bytes - done);
  // Non-temporal stores are weakly ordered: without the fence, a thread
  // that learns of the copy's end through a lock could still read old bytes.
  _mm_sfence();
#else
  std::memcpy(destination, source, bytes);
#endif
}

void CopyWith(Stores stores, std::byte* destination, const std::byte* source,
              std::uint64_t bytes) {
  if (stores == Stores::kStreaming) {
    StreamingCopy(destination, source, bytes);
  } else {
    std::memcpy(destination, source, bytes);
  }
}

}  // namespace memd::transfer
