#pragma once

// memd FAKE CUDA driver (a test double): the environment variables that
// shape its asynchronous side, parsed. Pure functions, no driver state.
//
//   MEMD_FAKE_CUDA_LINK_GBPS        "12" (host<->device both ways) or
//                                   "h2d=12,d2h=10,d2d=500" (any subset)
//   MEMD_FAKE_CUDA_COPY_LATENCY_US  per asynchronous copy, microseconds
//   MEMD_FAKE_CUDA_POISON           0 or 1
//   MEMD_FAKE_CUDA_FAULTS           "cuMemcpyHtoDAsync_v2@3=2;event@5=999;sticky@7=700;hang@4"
//
// README.md next to this file documents each one.

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

namespace memd::fake_cuda {

enum Direction { kHostToDevice = 0, kDeviceToHost = 1, kDeviceToDevice = 2 };
constexpr int kDirections = 3;

// GB/s (1e9 bytes per second, i.e. bytes per nanosecond) per direction; 0 is
// instant.
struct LinkModel {
  double gbps[kDirections] = {0, 0, 0};
  std::uint64_t latency_us = 0;
};

// The Nth call (1-based, counted from cuInit) of an exported symbol returns
// `code` and does nothing else.
struct CallFault {
  std::string symbol;
  std::uint64_t call = 0;
  CUresult code = CUDA_SUCCESS;
};

// What happens to the Nth accepted asynchronous copy of the process.
enum class CopyFaultKind {
  kNone,
  kEvent,   // Completes with `code`, surfaced once by a later query or synchronize.
  kSticky,  // Completes with `code` and breaks its device's context for good.
  kHang,    // Never completes.
};

struct CopyFault {
  CopyFaultKind kind = CopyFaultKind::kNone;
  std::uint64_t copy = 0;
  CUresult code = CUDA_SUCCESS;
};

struct Faults {
  std::vector<CallFault> calls;
  std::vector<CopyFault> copies;
};

// Each returns false and says why in `error` when `text` is malformed.
bool ParseLinkModel(const char* gbps, const char* latency_us, LinkModel* model,
                    std::string* error);
bool ParseFaults(const char* text, Faults* faults, std::string* error);

// Whether the library exports `name` (fake_cuda.map): call faults may name it.
bool IsExportedSymbol(const std::string& name);

}  // namespace memd::fake_cuda
