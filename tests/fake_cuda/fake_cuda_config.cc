// memd FAKE CUDA driver (a test double): parsing of the link model and of the
// fault plan. See fake_cuda_config.h and README.md.

#include "tests/fake_cuda/fake_cuda_config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "tests/fake_cuda/fake_cuda_errors.h"

namespace memd::fake_cuda {
namespace {

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

// Digits only, at least one; no sign, no spaces.
bool ParseCount(const std::string& text, std::uint64_t* value) {
  if (text.empty() || text.size() > 18) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  *value = std::strtoull(text.c_str(), nullptr, 10);
  return true;
}

// A positive decimal number: "12", "0.5", "1e3" (strtod), finite and > 0.
bool ParseRate(const std::string& text, double* value) {
  if (text.empty() || text[0] == '-' || text[0] == '+' || text[0] == ' ') return false;
  errno = 0;
  char* end = nullptr;
  const double parsed = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == nullptr || *end != '\0' || !std::isfinite(parsed) || parsed <= 0) {
    return false;
  }
  *value = parsed;
  return true;
}

// A CUresult that cuda.h defines, other than CUDA_SUCCESS.
bool ParseCode(const std::string& text, CUresult* code) {
  std::uint64_t value = 0;
  if (!ParseCount(text, &value) || value == 0 || value >= 1024 ||
      ErrorName(static_cast<CUresult>(value)) == nullptr) {
    return false;
  }
  *code = static_cast<CUresult>(value);
  return true;
}

bool Fail(std::string* error, const std::string& why) {
  *error = why;
  return false;
}

}  // namespace

bool ParseLinkModel(const char* gbps, const char* latency_us, LinkModel* model,
                    std::string* error) {
  LinkModel parsed;
  if (gbps != nullptr) {
    const std::string text = gbps;
    double rate = 0;
    if (text.find('=') == std::string::npos) {
      if (!ParseRate(text, &rate)) {
        return Fail(error, "MEMD_FAKE_CUDA_LINK_GBPS=\"" + text +
                               "\" is not a positive number of GB/s or h2d=..,d2h=..,d2d=..");
      }
      parsed.gbps[kHostToDevice] = parsed.gbps[kDeviceToHost] = rate;
    } else {
      bool seen[kDirections] = {false, false, false};
      for (const std::string& entry : Split(text, ',')) {
        const size_t equals = entry.find('=');
        const std::string key = entry.substr(0, equals);
        const int direction = key == "h2d" ? kHostToDevice
                              : key == "d2h" ? kDeviceToHost
                              : key == "d2d" ? kDeviceToDevice
                                             : -1;
        if (equals == std::string::npos || direction < 0 || seen[direction] ||
            !ParseRate(entry.substr(equals + 1), &rate)) {
          return Fail(error, "MEMD_FAKE_CUDA_LINK_GBPS entry \"" + entry +
                                 "\" is not h2d=GBPS, d2h=GBPS or d2d=GBPS (once each)");
        }
        seen[direction] = true;
        parsed.gbps[direction] = rate;
      }
    }
  }
  if (latency_us != nullptr) {
    // At most 10 s: a typo should not make every copy hang.
    if (!ParseCount(latency_us, &parsed.latency_us) || parsed.latency_us > 10'000'000) {
      return Fail(error, std::string("MEMD_FAKE_CUDA_COPY_LATENCY_US=\"") + latency_us +
                             "\" is not a number of microseconds up to 10000000");
    }
  }
  *model = parsed;
  return true;
}

bool ParseFaults(const char* text, Faults* faults, std::string* error) {
  Faults parsed;
  if (text != nullptr) {
    for (const std::string& entry : Split(text, ';')) {
      const size_t at = entry.find('@');
      const size_t equals = entry.find('=');
      if (at == std::string::npos || at == 0 || (equals != std::string::npos && equals < at)) {
        return Fail(error, "MEMD_FAKE_CUDA_FAULTS entry \"" + entry +
                               "\" is not NAME@N=CODE or hang@N");
      }
      const std::string name = entry.substr(0, at);
      const std::string count =
          entry.substr(at + 1, equals == std::string::npos ? std::string::npos : equals - at - 1);
      std::uint64_t n = 0;
      if (!ParseCount(count, &n) || n == 0) {
        return Fail(error, "MEMD_FAKE_CUDA_FAULTS entry \"" + entry + "\": N counts from 1");
      }
      CUresult code = CUDA_SUCCESS;
      if (name == "hang") {
        if (equals != std::string::npos) {
          return Fail(error, "MEMD_FAKE_CUDA_FAULTS entry \"" + entry + "\": hang takes no code");
        }
      } else if (equals == std::string::npos || !ParseCode(entry.substr(equals + 1), &code)) {
        return Fail(error, "MEMD_FAKE_CUDA_FAULTS entry \"" + entry +
                               "\": CODE must be a non-zero CUresult that cuda.h defines");
      }
      if (name == "event" || name == "sticky" || name == "hang") {
        const CopyFaultKind kind = name == "event"    ? CopyFaultKind::kEvent
                                   : name == "sticky" ? CopyFaultKind::kSticky
                                                      : CopyFaultKind::kHang;
        for (const CopyFault& other : parsed.copies) {
          if (other.copy == n) {
            return Fail(error, "MEMD_FAKE_CUDA_FAULTS names copy " + count + " twice");
          }
        }
        parsed.copies.push_back(CopyFault{kind, n, code});
        continue;
      }
      if (!IsExportedSymbol(name) || name == "cuInit") {
        return Fail(error, "MEMD_FAKE_CUDA_FAULTS entry \"" + entry +
                               "\": NAME must be event, sticky, hang or a symbol the fake "
                               "exports (by its versioned name; not cuInit)");
      }
      for (const CallFault& other : parsed.calls) {
        if (other.symbol == name && other.call == n) {
          return Fail(error, "MEMD_FAKE_CUDA_FAULTS names call " + count + " of " + name +
                                 " twice");
        }
      }
      parsed.calls.push_back(CallFault{name, n, code});
    }
  }
  *faults = std::move(parsed);
  return true;
}

bool IsExportedSymbol(const std::string& name) {
  static constexpr const char* kSymbols[] = {
      "cuGetErrorString", "cuGetErrorName", "cuInit", "cuDriverGetVersion", "cuDeviceGet",
      "cuDeviceGetCount", "cuDeviceGetName", "cuDeviceGetUuid_v2", "cuDeviceTotalMem_v2",
      "cuDeviceGetAttribute", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2",
      "cuDevicePrimaryCtxGetState",
      "cuCtxSetCurrent", "cuCtxGetCurrent", "cuCtxGetDevice", "cuMemGetInfo_v2",
      "cuMemGetAllocationGranularity", "cuMemCreate", "cuMemRelease", "cuMemAddressReserve",
      "cuMemAddressFree", "cuMemMap", "cuMemUnmap", "cuMemSetAccess",
      "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle", "cuMemAlloc_v2",
      "cuMemFree_v2", "cuIpcGetMemHandle", "cuIpcOpenMemHandle_v2", "cuIpcCloseMemHandle",
      "cuMemHostRegister_v2", "cuMemHostUnregister", "cuMemHostGetDevicePointer_v2",
      "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemsetD8_v2", "cuMemHostAlloc", "cuMemFreeHost",
      "cuCtxGetStreamPriorityRange", "cuStreamCreateWithPriority", "cuStreamDestroy_v2",
      "cuStreamSynchronize", "cuStreamWaitEvent", "cuEventCreate", "cuEventDestroy_v2",
      "cuEventRecord", "cuEventQuery", "cuEventSynchronize", "cuMemcpyHtoDAsync_v2",
      "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", "cuLaunchHostFunc"};
  for (const char* symbol : kSymbols) {
    if (name == symbol) return true;
  }
  return false;
}

}  // namespace memd::fake_cuda
