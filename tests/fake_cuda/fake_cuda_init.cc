// memd FAKE CUDA driver (a test double): cuInit, and the environment it
// reads once per load of the library (MEMD_FAKE_CUDA_*, CUDA_VISIBLE_DEVICES).

#include <cuda.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/fake_cuda/fake_cuda_config.h"
#include "tests/fake_cuda/fake_cuda_errors.h"
#include "tests/fake_cuda/fake_cuda_state.h"
#include "tests/fake_cuda/fake_cuda_util.h"

namespace memd::fake_cuda {
namespace {

constexpr int kMaxDevices = 64;
constexpr uint64_t kDefaultMemory = uint64_t{1} << 30;

// Digits only: no sign, no suffix, no spaces.
bool ParseUnsigned(const char* text, uint64_t* value) {
  if (text == nullptr || *text == '\0') return false;
  for (const char* c = text; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9') return false;
  }
  errno = 0;
  char* end = nullptr;
  const unsigned long long parsed = std::strtoull(text, &end, 10);
  if (errno != 0 || end == nullptr || *end != '\0') return false;
  *value = parsed;
  return true;
}

// As nvidia-smi prints it: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
std::string UuidString(const CUuuid& uuid) {
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    char hex[3];
    std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(uuid.bytes[i]));
    text += hex;
  }
  return text;
}

// The physical device one CUDA_VISIBLE_DEVICES entry names, or -1 when it
// names none: an index below `physical_count` (digits only), or "GPU-" and
// then the start of exactly one device's UUID (hex case-insensitive).
int IdentifyDevice(const std::string& entry, int physical_count) {
  uint64_t index = 0;
  if (ParseUnsigned(entry.c_str(), &index)) {
    return index < static_cast<uint64_t>(physical_count) ? static_cast<int>(index) : -1;
  }
  constexpr char kUuidPrefix[] = "GPU-";
  constexpr size_t kUuidPrefixLength = sizeof(kUuidPrefix) - 1;
  if (entry.size() <= kUuidPrefixLength || entry.compare(0, kUuidPrefixLength, kUuidPrefix) != 0) {
    return -1;
  }
  int found = -1;
  for (int physical = 0; physical < physical_count; ++physical) {
    const std::string uuid = UuidString(PhysicalUuid(physical));
    if (entry.size() > uuid.size()) continue;
    bool same = true;
    for (size_t i = kUuidPrefixLength; i < entry.size() && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(entry[i])) == uuid[i];
    }
    if (!same) continue;
    if (found >= 0) return -1;  // Ambiguous: the start of several UUIDs.
    found = physical;
  }
  return found;
}

// The physical devices a process sees, in the order it numbers them: all of
// them when CUDA_VISIBLE_DEVICES is unset; else the devices its comma-separated
// entries name, up to the first entry that names none or names one again
// (so "" shows none, and "0,7,1" with 2 devices shows device 0 only).
std::vector<int> VisibleDevices(const char* list, int physical_count) {
  std::vector<int> visible;
  if (list == nullptr) {
    for (int physical = 0; physical < physical_count; ++physical) visible.push_back(physical);
    return visible;
  }
  const std::string text = list;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    const std::string entry =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const int physical = IdentifyDevice(entry, physical_count);
    if (physical < 0 || std::find(visible.begin(), visible.end(), physical) != visible.end()) {
      break;
    }
    visible.push_back(physical);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return visible;
}

const char* Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? value : nullptr;
}

void Complain(const char* name, const char* value, const char* expected) {
  std::fprintf(stderr, "memd fake CUDA driver: cuInit: %s=\"%s\" is not %s\n", name,
               value, expected);
}

}  // namespace

CUresult FakeDriver::Init(unsigned int flags) {
  std::lock_guard<std::mutex> lock(mu_);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!init_attempted_) {
    init_attempted_ = true;
    init_result_ = Configure();  // Sticky, as in CUDA: a failed cuInit stays failed.
  }
  return init_result_;
}

CUresult FakeDriver::Configure() {
  if (const char* text = Env("MEMD_FAKE_CUDA_INIT_ERROR")) {
    uint64_t code = 0;
    if (!ParseUnsigned(text, &code) || code >= 1024 ||  // CUresult's range.
        ErrorName(static_cast<CUresult>(code)) == nullptr) {
      Complain("MEMD_FAKE_CUDA_INIT_ERROR", text, "a CUresult that cuda.h defines");
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (code != CUDA_SUCCESS) return static_cast<CUresult>(code);
  }
  uint64_t count = 1;
  if (const char* text = Env("MEMD_FAKE_CUDA_DEVICES")) {
    if (!ParseUnsigned(text, &count) || count > kMaxDevices) {
      Complain("MEMD_FAKE_CUDA_DEVICES", text, "a device count from 0 to 64");
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  uint64_t memory = kDefaultMemory;
  if (const char* text = Env("MEMD_FAKE_CUDA_MEMORY")) {
    if (!ParseUnsigned(text, &memory) || memory > SIZE_MAX / 2) {
      Complain("MEMD_FAKE_CUDA_MEMORY", text, "a number of bytes");
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  bool vmm = true;
  if (const char* text = Env("MEMD_FAKE_CUDA_VMM")) {
    if (std::strcmp(text, "0") != 0 && std::strcmp(text, "1") != 0) {
      Complain("MEMD_FAKE_CUDA_VMM", text, "0 or 1");
      return CUDA_ERROR_INVALID_VALUE;
    }
    vmm = text[0] == '1';
  }
  std::string error;
  LinkModel link;
  if (!ParseLinkModel(Env("MEMD_FAKE_CUDA_LINK_GBPS"), Env("MEMD_FAKE_CUDA_COPY_LATENCY_US"),
                      &link, &error)) {
    std::fprintf(stderr, "memd fake CUDA driver: cuInit: %s\n", error.c_str());
    return CUDA_ERROR_INVALID_VALUE;
  }
  bool poison = false;
  if (const char* text = Env("MEMD_FAKE_CUDA_POISON")) {
    if (std::strcmp(text, "0") != 0 && std::strcmp(text, "1") != 0) {
      Complain("MEMD_FAKE_CUDA_POISON", text, "0 or 1");
      return CUDA_ERROR_INVALID_VALUE;
    }
    poison = text[0] == '1';
  }
  Faults faults;
  if (!ParseFaults(Env("MEMD_FAKE_CUDA_FAULTS"), &faults, &error)) {
    std::fprintf(stderr, "memd fake CUDA driver: cuInit: %s\n", error.c_str());
    return CUDA_ERROR_INVALID_VALUE;
  }
  link_ = link;
  poison_ = poison;
  copy_faults_ = faults.copies;
  if (!faults.calls.empty()) {
    std::lock_guard<std::mutex> fault_lock(fault_mu_);
    for (const CallFault& fault : faults.calls) call_faults_[fault.symbol].faults.push_back(fault);
    call_faults_armed_.store(true, std::memory_order_release);
  }
  memory_ = static_cast<size_t>(memory);
  vmm_ = vmm;
  physical_count_ = static_cast<int>(count);
  // Unlike MEMD_FAKE_CUDA_*, set but empty means something: no device. A
  // bad entry is no error, as in CUDA: it ends the list.
  for (int physical : VisibleDevices(std::getenv("CUDA_VISIBLE_DEVICES"), physical_count_)) {
    auto device = std::make_unique<Device>();
    device->physical = physical;
    device->context.device = static_cast<int>(devices_.size());
    devices_.push_back(std::move(device));
  }
  return CUDA_SUCCESS;
}

}  // namespace memd::fake_cuda
