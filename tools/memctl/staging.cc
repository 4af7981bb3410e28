#include "tools/memctl/staging.h"

#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "tools/memctl/failure.h"

namespace memd::memctl {
namespace {

constexpr std::uint64_t kPage = 4096;

// Whether the daemon has a pinned pool (Stats lists one pool per location
// it serves). A daemon that cannot say gets host staging: slower, not wrong.
bool ServesPinned(Client& client) {
  absl::StatusOr<DaemonStats> stats = client.Stats();
  if (!stats.ok()) return false;
  return std::any_of(stats->pools.begin(), stats->pools.end(),
                     [](const PoolStats& pool) { return pool.location == "pinned"; });
}

}  // namespace

absl::StatusOr<Staging> Staging::Create(Client& client, std::uint64_t total) {
  const std::uint64_t slice_bytes = std::min(kSliceBytes, AlignUp(std::max<std::uint64_t>(total, 1), kPage));
  const int slices = static_cast<int>(
      std::min<std::uint64_t>(kSlices, (total + slice_bytes - 1) / slice_bytes));
  const std::uint64_t bytes = slice_bytes * static_cast<std::uint64_t>(std::max(slices, 1));
  // The session id makes the name unique on this daemon; the pid tells an
  // operator whose it is.
  const std::string name =
      absl::StrCat(".memctl/staging-", client.session_id(), "-", ::getpid());
  CreateOptions options;
  options.persistence = Persistence::kEphemeral;
  options.mode = 0600;
  options.populate = true;  // Every byte is written: fault the pages in once.
  std::vector<std::string> locations;
  if (ServesPinned(client)) locations.push_back("pinned");
  locations.push_back("host");
  absl::Status last;
  for (const std::string& location : locations) {
    options.location = location;
    absl::StatusOr<Buffer> buffer = client.Create(name, bytes, options);
    if (buffer.ok()) return Staging(*std::move(buffer), slice_bytes, std::max(slices, 1));
    last = buffer.status();
  }
  return Failed(absl::StrCat("staging (", FormatBytes(bytes), ")"), last);
}

std::span<std::byte> Staging::Slice(int index, std::uint64_t length) {
  return buffer_.mutable_data().subspan(static_cast<std::size_t>(index) * slice_bytes_,
                                        static_cast<std::size_t>(length));
}

Region Staging::SliceRegion(int index, std::uint64_t length) const {
  return Region{&buffer_, static_cast<std::uint64_t>(index) * slice_bytes_, length};
}

}  // namespace memd::memctl
