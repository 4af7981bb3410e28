#include "common/numa.h"

#include <linux/mempolicy.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/ascii.h"
#include "common/status_macros.h"
#include "common/errno_status.h"

namespace memd::numa {
namespace {

constexpr int kBitsPerWord = 8 * sizeof(unsigned long);

}  // namespace

int NodeCount(const std::string& sysfs) {
  std::error_code error;
  std::filesystem::directory_iterator it(sysfs + "/devices/system/node", error);
  if (error) return 0;
  int count = 0;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().native();
    int index = 0;
    if (name.starts_with("node") && absl::SimpleAtoi(name.substr(4), &index)) ++count;
  }
  return count;
}

std::string PciBusId(int domain, int bus, int device) {
  return absl::StrFormat("%04x:%02x:%02x.0", domain, bus, device);
}

std::optional<int> NodeOfPciDevice(std::string_view bus_id, const std::string& sysfs) {
  std::ifstream in(absl::StrCat(sysfs, "/bus/pci/devices/", std::string(bus_id), "/numa_node"));
  std::string text;
  if (!(in >> text)) return std::nullopt;
  int node = -1;
  if (!absl::SimpleAtoi(text, &node) || node < 0) return std::nullopt;
  return node;
}

std::optional<int> NodeOfCpu(int cpu, const std::string& sysfs) {
  if (cpu < 0) return std::nullopt;
  std::error_code error;
  std::filesystem::directory_iterator it(sysfs + "/devices/system/node", error);
  if (error) return std::nullopt;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().native();
    int node = 0;
    if (!name.starts_with("node") || !absl::SimpleAtoi(name.substr(4), &node)) continue;
    std::ifstream in(entry.path() / "cpulist");
    std::string list;
    if (!std::getline(in, list)) continue;
    for (absl::string_view range : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
      range = absl::StripAsciiWhitespace(range);
      const std::vector<absl::string_view> ends = absl::StrSplit(range, '-');
      int first = 0;
      int last = 0;
      if (!absl::SimpleAtoi(ends[0], &first)) continue;
      last = first;
      if (ends.size() == 2 && !absl::SimpleAtoi(ends[1], &last)) continue;
      if (cpu >= first && cpu <= last) return node;
    }
  }
  return std::nullopt;
}

std::optional<int> LastCpuOf(pid_t pid, const std::string& proc) {
  std::ifstream in(absl::StrCat(proc, "/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  // The command (field 2) is in parentheses and may hold spaces and ')':
  // fields count from after its last ')', which is field 3.
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(close + 1), ' ', absl::SkipEmpty());
  constexpr std::size_t kProcessor = 39 - 3;
  int cpu = -1;
  if (fields.size() <= kProcessor || !absl::SimpleAtoi(fields[kProcessor], &cpu) || cpu < 0) {
    return std::nullopt;
  }
  return cpu;
}

absl::Status PreferNode(void* address, std::uint64_t bytes, int node) {
  if (node < 0 || node >= 1024) {
    return absl::InvalidArgumentError(absl::StrCat("NUMA node ", node, " is out of range"));
  }
  std::vector<unsigned long> mask(node / kBitsPerWord + 1, 0);
  mask[node / kBitsPerWord] = 1ul << (node % kBitsPerWord);
  if (::syscall(SYS_mbind, address, bytes, MPOL_PREFERRED, mask.data(),
                mask.size() * kBitsPerWord, 0) != 0) {
    return ErrnoStatus(absl::StrCat("mbind of ", bytes, " bytes to NUMA node ", node), errno);
  }
  return absl::OkStatus();
}

absl::StatusOr<NodeMemory> NodeMemory::Map(std::uint64_t bytes, int node) {
  if (bytes == 0) return absl::InvalidArgumentError("0 bytes of memory asked of a NUMA node");
  if (node < 0 || node >= 1024) {
    return absl::InvalidArgumentError(absl::StrCat("NUMA node ", node, " is out of range"));
  }
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) return ErrnoStatus(absl::StrCat("mmap of ", bytes, " bytes"), errno);
  NodeMemory memory(static_cast<std::byte*>(data), bytes);
  MEMD_RETURN_IF_ERROR(PreferNode(data, bytes, node));
  // Every page now, on the node, not when the first copy touches it.
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  for (std::uint64_t at = 0; at < bytes; at += page) memory.bytes_[at] = std::byte{0};
  return memory;
}

NodeMemory::NodeMemory(NodeMemory&& other) noexcept
    : bytes_(std::exchange(other.bytes_, {})) {}

NodeMemory& NodeMemory::operator=(NodeMemory&& other) noexcept {
  if (this != &other) {
    if (!bytes_.empty()) ::munmap(bytes_.data(), bytes_.size());
    bytes_ = std::exchange(other.bytes_, {});
  }
  return *this;
}

NodeMemory::~NodeMemory() {
  if (!bytes_.empty()) ::munmap(bytes_.data(), bytes_.size());
}

std::optional<int> NodeOfPage(const void* address) {
  int node = -1;
  if (::syscall(SYS_get_mempolicy, &node, nullptr, 0, const_cast<void*>(address),
                MPOL_F_NODE | MPOL_F_ADDR) != 0 ||
      node < 0) {
    return std::nullopt;
  }
  return node;
}

std::optional<int> PolicyNodeOf(const void* address) {
  int mode = MPOL_DEFAULT;
  std::vector<unsigned long> mask(1024 / kBitsPerWord, 0);
  if (::syscall(SYS_get_mempolicy, &mode, mask.data(), mask.size() * kBitsPerWord,
                const_cast<void*>(address), MPOL_F_ADDR) != 0 ||
      (mode != MPOL_PREFERRED && mode != MPOL_BIND)) {
    return std::nullopt;
  }
  std::optional<int> node;
  for (std::size_t word = 0; word < mask.size(); ++word) {
    for (int bit = 0; bit < kBitsPerWord; ++bit) {
      if ((mask[word] >> bit & 1) == 0) continue;
      if (node.has_value()) return std::nullopt;
      node = static_cast<int>(word) * kBitsPerWord + bit;
    }
  }
  return node;
}

}  // namespace memd::numa
