#pragma once

// CRC-32C (Castagnoli), for the state file's frames and header. Our own,
// small and table-driven: this Abseil has no absl::crc32c, and frames are a
// few hundred bytes, so a table per byte is fast enough.

#include <cstddef>
#include <cstdint>

namespace memd::durable {

// The CRC-32C of `bytes` bytes at `data` ("123456789" gives 0xe3069283).
std::uint32_t Crc32c(const void* data, std::size_t bytes);

}  // namespace memd::durable
