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

absl::StatusOr<NodeMemory> NodeMemory::Map(std::uint64_t bytes, int node) {
  if (bytes == 0) return absl::InvalidArgumentError("0 bytes of memory asked of a NUMA node");
  if (node < 0 || node >= 1024) {
    return absl::InvalidArgumentError(absl::StrCat("NUMA node ", node, " is out of range"));
  }
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) return ErrnoStatus(absl::StrCat("mmap of ", bytes, " bytes"), errno);
  NodeMemory memory(static_cast<std::byte*>(data), bytes);
  std::vector<unsigned long> mask(node / kBitsPerWord + 1, 0);
  mask[node / kBitsPerWord] = 1ul << (node % kBitsPerWord);
  if (::syscall(SYS_mbind, data, bytes, MPOL_PREFERRED, mask.data(), mask.size() * kBitsPerWord,
                0) != 0) {
    return ErrnoStatus(absl::StrCat("mbind of ", bytes, " bytes to NUMA node ", node), errno);
  }
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

}  // namespace memd::numa
