#pragma once

// A broker on the fake backend with a host pool and two fake devices, a
// ReplicaCopier that copies when the test says so, and a journal that keeps
// each buffer's last state: what the replica and pressure tests share.

#include <sys/mman.h>

#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "daemon/broker/broker.h"
#include "daemon/pool/carving_pool.h"
#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"
#include "tests/daemon/peer.h"
#include "tests/support/fake_clock.h"

namespace memd::broker {

using ::memd::test::Peer;

inline constexpr std::uint64_t kMiB = 1 << 20;
inline constexpr uid_t kAlice = 1000;
inline constexpr uid_t kBob = 1001;
inline const Location kHost = Location::Host();
inline const Location kDev0 = Location::Device(0);
inline const Location kDev1 = Location::Device(1);

// Fills wait here until the test finishes them, oldest first: then the
// bytes are copied (both ends are host-mapped on the fake backend) and the
// broker told.
class FakeCopier : public ReplicaCopier {
 public:
  absl::Status Start(SessionId session, uid_t uid, CopyEnds ends,
                     std::function<void(const absl::Status&)> done) override {
    absl::MutexLock lock(&mu_);
    if (!refusal_.ok()) return refusal_;
    pending_.push_back(Fill{session, uid, std::move(ends), std::move(done)});
    ++started_;
    return absl::OkStatus();
  }
  void Refuse(absl::Status status) {
    absl::MutexLock lock(&mu_);
    refusal_ = std::move(status);
  }
  // Ends the oldest fill with `status` (copying its bytes when OK).
  void Finish(absl::Status status = absl::OkStatus()) {
    Fill fill;
    {
      absl::MutexLock lock(&mu_);
      ASSERT_FALSE(pending_.empty());
      fill = std::move(pending_.front());
      pending_.pop_front();
    }
    if (status.ok()) {
      std::memcpy(fill.ends.destination.memory.host, fill.ends.source.memory.host,
                  fill.ends.source.length);
    }
    fill.ends.destination.pin->Written();
    fill.ends = {};  // The engine lets go of both ends before it reports.
    fill.done(status);
  }
  int pending() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(pending_.size());
  }
  int started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }
  uid_t last_uid() {
    absl::MutexLock lock(&mu_);
    return pending_.empty() ? 0 : pending_.back().uid;
  }

 private:
  struct Fill {
    SessionId session = 0;
    uid_t uid = 0;
    CopyEnds ends;
    std::function<void(const absl::Status&)> done;
  };
  absl::Mutex mu_;
  std::deque<Fill> pending_ ABSL_GUARDED_BY(mu_);
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
};

// Records what the broker journals of each buffer, last state wins.
class LastStates : public BufferJournal {
 public:
  void BufferChanged(const BufferInfo& info, const pool::Allocation&) override {
    absl::MutexLock lock(&mu_);
    last_[info.id] = info;
  }
  void BufferFreed(BufferId id) override {
    absl::MutexLock lock(&mu_);
    last_.erase(id);
  }
  std::optional<BufferInfo> Of(BufferId id) {
    absl::MutexLock lock(&mu_);
    auto it = last_.find(id);
    if (it == last_.end()) return std::nullopt;
    return it->second;
  }

 private:
  absl::Mutex mu_;
  std::map<BufferId, BufferInfo> last_ ABSL_GUARDED_BY(mu_);
};

class ReplicaFixture : public ::testing::Test {
 protected:
  ReplicaFixture() { MakeBroker(BrokerLimits{}); }

  void MakeBroker(BrokerLimits limits) {
    broker_.reset();
    pools_ = std::make_unique<pool::PoolSet>();
    pool::CarvingPoolOptions options;
    options.limit_bytes = pool_limit_;
    for (const Location& at : {kHost, kDev0, kDev1}) {
      pools_->Add(std::make_unique<pool::CarvingPool>(backend_, at, options, clock_));
    }
    broker_ = std::make_unique<Broker>(*pools_, limits, clock_);
    broker_->SetReplicaCopier(&copier_);
    broker_->SetJournal(&journal_);
    alice_ = Start(kAlice);
    bob_ = Start(kBob);
  }
  ~ReplicaFixture() override {
    // The test's `woken` flags died with its body: the fills finished here
    // wake into nothing (Wake).
    *body_running_ = false;
    while (copier_.pending() > 0) copier_.Finish(absl::CancelledError("test over"));
  }

  // A wake that sets `*woken`, a flag of the test body, while the body
  // runs: a fill the destructor finishes must not write into its dead stack
  // (it did, into the frame of the very Finish that ran it, once Fill grew).
  std::function<void()> Wake(bool* woken) {
    return [woken, running = body_running_] {
      if (*running) *woken = true;
    };
  }

  SessionId Start(uid_t uid) {
    auto session = broker_->StartSession(Peer(uid), "test");
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  }

  // Creates `name` on the host with `text`, mode `mode`, and seals it.
  Grant Publish(const std::string& name, const std::string& text,
                std::uint32_t mode = 0644) {
    auto grant = broker_->Create(alice_, CreateParams{name, text.size(), kHost, mode});
    EXPECT_TRUE(grant.ok()) << grant.status();
    Write(*grant, text);
    EXPECT_TRUE(broker_->Seal(alice_, grant->lease).ok());
    return std::move(*grant);
  }

  static void Write(const Grant& grant, const std::string& text) {
    void* map = ::mmap(nullptr, grant.mapped_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                       grant.handle.fd, grant.offset);
    ASSERT_NE(map, MAP_FAILED);
    std::memcpy(map, text.data(), text.size());
    ::munmap(map, grant.mapped_bytes);
  }
  static std::string Read(const Grant& grant, std::size_t size) {
    void* map = ::mmap(nullptr, grant.mapped_bytes, PROT_READ, MAP_SHARED, grant.handle.fd,
                       grant.offset);
    EXPECT_NE(map, MAP_FAILED);
    std::string text(static_cast<const char*>(map), size);
    ::munmap(map, grant.mapped_bytes);
    return text;
  }

  // One open at `at` by `session` that may wait: the grant, or nullopt
  // with `woken` set once the broker wakes it.
  absl::StatusOr<std::optional<Grant>> OpenAt(SessionId session, const std::string& name,
                                              const Location& at, WatchId watch, bool* woken,
                                              Access access = Access::kRead) {
    OpenParams params{name, access};
    params.location = at;
    return broker_->OpenOrWatch(session, params, watch, Wake(woken));
  }

  // Opens at `at` and, when a fill is needed, finishes it and opens again.
  Grant OpenThere(SessionId session, const std::string& name, const Location& at) {
    bool woken = false;
    const WatchId watch = broker_->NewWatchId();
    auto first = OpenAt(session, name, at, watch, &woken);
    EXPECT_TRUE(first.ok()) << first.status();
    if (first.ok() && first->has_value()) return std::move(**first);
    copier_.Finish();
    EXPECT_TRUE(woken);
    auto again = OpenAt(session, name, at, watch, &woken);
    EXPECT_TRUE(again.ok() && again->has_value()) << again.status();
    return again.ok() && again->has_value() ? std::move(**again) : Grant{};
  }

  // A writer's open at `at` of an unsealed buffer, with the fill it needs
  // finished: the grant (or why not).
  absl::StatusOr<std::optional<Grant>> WriterAt(SessionId session, const std::string& name,
                                                const Location& at, WatchId watch,
                                                bool* woken) {
    auto first = OpenAt(session, name, at, watch, woken, Access::kReadWrite);
    if (!first.ok() || first->has_value()) return first;
    copier_.Finish();
    return OpenAt(session, name, at, watch, woken, Access::kReadWrite);
  }

  std::uint64_t UsageOf(uid_t uid, const Location& at) {
    auto usage = broker_->Usage(0);
    EXPECT_TRUE(usage.ok());
    for (const UidUsage& u : *usage) {
      if (u.uid == uid && u.location == at) return u.bytes;
    }
    return 0;
  }

  // Each location's pool limit, for the next MakeBroker.
  std::uint64_t pool_limit_ = 64 * kMiB;
  test::FakeClock clock_;
  test::FakeBackend backend_;
  FakeCopier copier_;
  LastStates journal_;
  std::unique_ptr<pool::PoolSet> pools_;
  std::unique_ptr<Broker> broker_;
  // False once the test body has returned (Wake).
  std::shared_ptr<bool> body_running_ = std::make_shared<bool>(true);
  SessionId alice_ = 0;
  SessionId bob_ = 0;
};

}  // namespace memd::broker
