#pragma once

#include <fcntl.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "daemon/pool/segment_journal.h"

namespace memd::test {

/// A SegmentJournal for tests: writes every call down in order ("added 3",
/// "changed 3", "removed 3") and keeps what a durable state would: the
/// record of each segment in the pool and a dup of its descriptor.
/// Thread-safe.
class RecordingJournal : public pool::SegmentJournal {
 public:
  using SegmentRecord = pool::SegmentRecord;
  struct Kept {
    SegmentRecord record;
    UniqueFd fd;  // A dup of the durable fd; invalid where it was -1.
  };

  void SegmentAdded(const SegmentRecord& segment, int durable_fd) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(absl::StrCat("added ", segment.id));
    kept_[segment.id] = Kept{
        segment, UniqueFd(durable_fd < 0 ? -1 : ::fcntl(durable_fd, F_DUPFD_CLOEXEC, 0))};
  }
  void SegmentChanged(const SegmentRecord& segment) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(absl::StrCat("changed ", segment.id));
    kept_[segment.id].record = segment;
  }
  void SegmentRemoved(std::uint64_t id) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(absl::StrCat("removed ", id));
    kept_.erase(id);
  }

  std::vector<std::string> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  // The records of the segments in the pool now.
  std::vector<SegmentRecord> records() const {
    absl::MutexLock lock(&mu_);
    std::vector<SegmentRecord> records;
    for (const auto& [id, kept] : kept_) records.push_back(kept.record);
    return records;
  }
  // A new dup of segment `id`'s descriptor (invalid if none).
  UniqueFd DupFd(std::uint64_t id) const {
    absl::MutexLock lock(&mu_);
    auto it = kept_.find(id);
    if (it == kept_.end() || !it->second.fd.valid()) return UniqueFd();
    return UniqueFd(::fcntl(it->second.fd.get(), F_DUPFD_CLOEXEC, 0));
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
  std::map<std::uint64_t, Kept> kept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memd::test
