#include "daemon/durable/state_journal.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace memd::durable {

absl::StatusOr<std::unique_ptr<StateJournal>> StateJournal::Create(DurableState initial,
                                                                   std::uint64_t epoch,
                                                                   StateStoreHooks hooks,
                                                                   StateJournalOptions options) {
  MEMD_ASSIGN_OR_RETURN(StateFile file, StateFile::Create(initial, epoch, options.journal_room));
  std::unique_ptr<StateJournal> journal(
      new StateJournal(std::move(initial), std::move(file), std::move(hooks), std::move(options)));
  absl::MutexLock lock(&journal->mu_);
  const std::string name = StateFdName(epoch);
  for (const std::string& old : journal->options_.superseded) {
    // Never the file just made, whatever the caller passed.
    if (old != name) journal->to_remove_.push_back(old);
  }
  MEMD_RETURN_IF_ERROR(journal->hooks_.store(name, journal->file_.fd()));
  journal->stored_ = true;
  // The journal exists now: a removal that fails is tried again, and
  // reported, at the next Record.
  journal->RemoveSuperseded(/*keep_failed=*/true).IgnoreError();
  return journal;
}

StateJournal::StateJournal(DurableState state, StateFile file, StateStoreHooks hooks,
                           StateJournalOptions options)
    : hooks_(std::move(hooks)),
      options_(std::move(options)),
      mirror_(std::move(state)),
      file_(std::move(file)) {}

absl::Status StateJournal::Record(std::span<const Change> batch) {
  absl::MutexLock lock(&mu_);
  for (const Change& change : batch) mirror_.Apply(change);
  if (!behind_ && !file_.Append(batch).ok()) {
    // Full (the only way an append fails): the next file starts from the
    // mirror, this batch included.
    behind_ = true;
  }
  if (behind_ || file_.journal_bytes() > CompactAfter()) MEMD_RETURN_IF_ERROR(Compact());
  return StoreCurrent();
}

DurableState StateJournal::state() const {
  absl::MutexLock lock(&mu_);
  return mirror_.state();
}

std::uint64_t StateJournal::epoch() const {
  absl::MutexLock lock(&mu_);
  return file_.epoch();
}

int StateJournal::fd() const {
  absl::MutexLock lock(&mu_);
  return file_.fd();
}

std::uint64_t StateJournal::CompactAfter() const {
  return std::max(options_.compact_floor, 4 * file_.snapshot_bytes());
}

absl::Status StateJournal::Compact() {
  MEMD_ASSIGN_OR_RETURN(
      StateFile next,
      StateFile::Create(mirror_.state(), file_.epoch() + 1, options_.journal_room));
  // A file that never made it into the store has nothing there to remove.
  if (stored_) to_remove_.push_back(StateFdName(file_.epoch()));
  file_ = std::move(next);
  stored_ = false;
  behind_ = false;
  return absl::OkStatus();
}

absl::Status StateJournal::StoreCurrent() {
  if (!stored_) {
    // Until this succeeds the store's newest file is an older one: the
    // caller hears of it, and the next Record tries again.
    MEMD_RETURN_IF_ERROR(hooks_.store(StateFdName(file_.epoch()), file_.fd()));
    stored_ = true;
  }
  return RemoveSuperseded(/*keep_failed=*/false);
}

absl::Status StateJournal::RemoveSuperseded(bool keep_failed) {
  absl::Status first_error;
  std::vector<std::string> failed;
  for (std::string& name : std::exchange(to_remove_, {})) {
    absl::Status status = hooks_.remove(name);
    if (status.ok()) continue;
    if (first_error.ok()) {
      first_error = absl::Status(status.code(),
                                 absl::StrCat("removing superseded ", name, ": ", status.message()));
    }
    if (keep_failed) failed.push_back(std::move(name));
  }
  to_remove_ = std::move(failed);
  return first_error;
}

absl::StatusOr<NewestState> LoadNewest(std::span<const NamedFd> fds) {
  constexpr std::string_view kPrefix = "memd.state.";
  NewestState newest;
  struct Candidate {
    std::uint64_t epoch;
    const NamedFd* fd;
  };
  std::vector<Candidate> candidates;
  for (const NamedFd& fd : fds) {
    if (fd.name.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    std::uint64_t epoch = 0;
    const std::string digits = fd.name.substr(kPrefix.size());
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
        !absl::SimpleAtoi(digits, &epoch)) {
      newest.skipped.push_back({fd.name, "not memd.state.<epoch>"});
      continue;
    }
    candidates.push_back({epoch, &fd});
  }
  if (candidates.empty()) return absl::NotFoundError("no state file in the store");
  const Candidate top = *std::max_element(
      candidates.begin(), candidates.end(),
      [](const Candidate& a, const Candidate& b) { return a.epoch < b.epoch; });
  const auto at_top = std::count_if(candidates.begin(), candidates.end(),
                                    [&](const Candidate& c) { return c.epoch == top.epoch; });
  if (at_top > 1) {
    return absl::DataLossError(
        absl::StrCat(at_top, " state files claim the newest epoch ", top.epoch));
  }
  absl::StatusOr<LoadedState> loaded = StateFile::Load(top.fd->fd);
  if (!loaded.ok()) {
    // Never an older file instead: it would silently undo every change
    // since, while the buffers those changes made still hold memory.
    const auto code = loaded.status().code() == absl::StatusCode::kFailedPrecondition
                          ? absl::StatusCode::kFailedPrecondition
                          : absl::StatusCode::kDataLoss;
    return absl::Status(code, absl::StrCat("the newest state file ", top.fd->name,
                                           " does not load (", loaded.status().message(),
                                           "); ", candidates.size() - 1,
                                           " older ones are not adopted in its place"));
  }
  if (loaded->epoch != top.epoch) {
    return absl::DataLossError(absl::StrCat("the state file stored as ", top.fd->name,
                                            " is of epoch ", loaded->epoch));
  }
  for (const Candidate& candidate : candidates) {
    if (candidate.fd != top.fd) {
      newest.skipped.push_back(
          {candidate.fd->name, absl::StrCat("older than epoch ", top.epoch)});
    }
  }
  newest.loaded = *std::move(loaded);
  newest.name = top.fd->name;
  return newest;
}

}  // namespace memd::durable
