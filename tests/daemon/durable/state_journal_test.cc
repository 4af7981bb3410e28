#include "daemon/durable/state_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/durable/sample_state.h"

namespace memd::durable {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using test::SampleBuffer;
using test::SampleState;

// The service manager's descriptor store as a map, with a log of the calls
// and failures to inject.
class FakeStore {
 public:
  StateStoreHooks Hooks() {
    return {[this](const std::string& name, int fd) -> absl::Status {
              log.push_back("store " + name);
              if (fail_stores > 0) {
                --fail_stores;
                return absl::UnavailableError("store refused");
              }
              fds[name] = UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
              return absl::OkStatus();
            },
            [this](const std::string& name) -> absl::Status {
              log.push_back("remove " + name);
              if (fail_removes > 0) {
                --fail_removes;
                return absl::UnavailableError("remove refused");
              }
              fds.erase(name);
              return absl::OkStatus();
            }};
  }

  std::vector<NamedFd> Named() const {
    std::vector<NamedFd> named;
    for (const auto& [name, fd] : fds) named.push_back({name, fd.get()});
    return named;
  }

  std::map<std::string, UniqueFd> fds;
  std::vector<std::string> log;
  int fail_stores = 0;
  int fail_removes = 0;
};

DurableState LoadStored(const FakeStore& store) {
  absl::StatusOr<NewestState> newest = LoadNewest(store.Named());
  EXPECT_TRUE(newest.ok()) << newest.status();
  return newest.ok() ? newest->loaded.state : DurableState{};
}

// A batch that moves buffer 10 around the host segment, so any number of
// them leaves a valid state.
std::vector<Change> MoveBuffer(int i) {
  BufferEntry buffer = SampleBuffer(10, 1, 0);
  buffer.offset = 8192 + static_cast<std::uint64_t>(i % 200) * 4096;
  buffer.attrs["step"] = std::to_string(i);
  return {buffer, SetGeneration{static_cast<std::uint64_t>(i)}};
}

TEST(StateJournalTest, CreateStoresTheFirstFileThenRemovesWhatItSupersedes) {
  FakeStore store;
  StateJournalOptions options;
  options.superseded = {"memd.state.3", "memd.state.4"};
  auto journal = StateJournal::Create(SampleState(), 4, store.Hooks(), options);
  ASSERT_TRUE(journal.ok()) << journal.status();
  // memd.state.4 is the new file's own name: never removed.
  EXPECT_THAT(store.log, ElementsAre("store memd.state.4", "remove memd.state.3"));
  EXPECT_EQ(LoadStored(store), SampleState());
}

TEST(StateJournalTest, ARemovalFailingAtCreateIsRetriedAndReportedAtTheFirstRecord) {
  FakeStore store;
  store.fail_removes = 1;
  StateJournalOptions options;
  options.superseded = {"memd.state.1"};
  auto journal = StateJournal::Create(SampleState(), 2, store.Hooks(), options);
  ASSERT_TRUE(journal.ok()) << journal.status();
  store.fail_removes = 1;
  absl::Status status = (*journal)->Record(MoveBuffer(0));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()), HasSubstr("removing superseded memd.state.1"));
  EXPECT_THAT(store.log, ElementsAre("store memd.state.2", "remove memd.state.1",
                                     "remove memd.state.1"));
  // Tried once at Record: not again.
  EXPECT_TRUE((*journal)->Record(MoveBuffer(1)).ok());
  EXPECT_EQ(store.log.size(), 3u);
}

TEST(StateJournalTest, CreateFailsWhenTheFirstStoreFails) {
  FakeStore store;
  store.fail_stores = 1;
  EXPECT_EQ(StateJournal::Create(SampleState(), 1, store.Hooks()).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(StateJournalTest, RecordedBatchesLoadBackFromTheStore) {
  FakeStore store;
  auto journal = StateJournal::Create(SampleState(), 1, store.Hooks());
  ASSERT_TRUE(journal.ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE((*journal)->Record(MoveBuffer(i)).ok());
  EXPECT_EQ((*journal)->state().buffers.at(10).attrs.at("step"), "9");
  EXPECT_EQ(LoadStored(store), (*journal)->state());
  EXPECT_EQ((*journal)->epoch(), 1u);
  EXPECT_EQ(store.log.size(), 1u);  // No hook call on the append path.
}

TEST(StateJournalTest, CompactsPastTheThresholdStoringBeforeRemoving) {
  FakeStore store;
  StateJournalOptions options;
  options.compact_floor = 0;  // So 4 x the snapshot decides.
  auto journal = StateJournal::Create(SampleState(), 1, store.Hooks(), options);
  ASSERT_TRUE(journal.ok());
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE((*journal)->Record(MoveBuffer(i)).ok());
    ASSERT_EQ(LoadStored(store), (*journal)->state()) << "after batch " << i;
  }
  const std::uint64_t epoch = (*journal)->epoch();
  EXPECT_GT(epoch, 3u);
  ASSERT_EQ(store.log.size(), 1 + 2 * (epoch - 1));
  for (std::uint64_t e = 2; e <= epoch; ++e) {
    EXPECT_EQ(store.log[2 * e - 3], "store " + StateFdName(e));
    EXPECT_EQ(store.log[2 * e - 2], "remove " + StateFdName(e - 1));
  }
  EXPECT_EQ(store.fds.size(), 1u);
  absl::StatusOr<NewestState> newest = LoadNewest(store.Named());
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->loaded.epoch, epoch);
}

TEST(StateJournalTest, CompactsWhenTheFileIsFull) {
  FakeStore store;
  StateJournalOptions options;
  options.compact_floor = std::uint64_t{1} << 40;  // Never by size.
  options.journal_room = 0;                        // Just 8 x the snapshot.
  auto journal = StateJournal::Create(SampleState(), 1, store.Hooks(), options);
  ASSERT_TRUE(journal.ok());
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE((*journal)->Record(MoveBuffer(i)).ok());
  EXPECT_GT((*journal)->epoch(), 1u);
  EXPECT_EQ(LoadStored(store), (*journal)->state());
}

TEST(StateJournalTest, AFailedStoreKeepsTheStateAndCatchesUp) {
  FakeStore store;
  StateJournalOptions options;
  options.compact_floor = std::uint64_t{1} << 40;
  options.journal_room = 0;
  auto journal = StateJournal::Create(SampleState(), 1, store.Hooks(), options);
  ASSERT_TRUE(journal.ok());
  absl::Status status;
  int i = 0;
  store.fail_stores = 2;
  for (; i < 5000 && status.ok(); ++i) status = (*journal)->Record(MoveBuffer(i));
  ASSERT_EQ(status.code(), absl::StatusCode::kUnavailable);
  // The mirror has the batch; the store still holds the last stored file.
  EXPECT_EQ((*journal)->state().generation, static_cast<std::uint64_t>(i - 1));
  EXPECT_NE(LoadStored(store), (*journal)->state());
  // The next Record stores again (and fails once more), then catches up.
  EXPECT_FALSE((*journal)->Record(MoveBuffer(i++)).ok());
  EXPECT_TRUE((*journal)->Record(MoveBuffer(i++)).ok());
  EXPECT_EQ(LoadStored(store), (*journal)->state());
  EXPECT_EQ(store.fds.size(), 1u);
}

TEST(StateJournalTest, ACrashBetweenStoreAndRemoveLeavesTheNewerAdopted) {
  FakeStore store;
  StateJournalOptions options;
  options.compact_floor = 0;
  auto journal = StateJournal::Create(SampleState(), 1, store.Hooks(), options);
  ASSERT_TRUE(journal.ok());
  store.fail_removes = 1;  // As if memd died right after the store.
  absl::Status status;
  for (int i = 0; i < 1000 && status.ok(); ++i) status = (*journal)->Record(MoveBuffer(i));
  EXPECT_THAT(std::string(status.message()), HasSubstr("removing superseded memd.state.1"));
  ASSERT_EQ(store.fds.size(), 2u);
  absl::StatusOr<NewestState> newest = LoadNewest(store.Named());
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->name, "memd.state.2");
  EXPECT_EQ(newest->loaded.state, (*journal)->state());
  ASSERT_EQ(newest->skipped.size(), 1u);
  EXPECT_EQ(newest->skipped[0].name, "memd.state.1");
  EXPECT_EQ(newest->skipped[0].why, "older than epoch 2");
}

TEST(StateJournalTest, ConcurrentRecordsAllLand) {
  FakeStore store;
  StateJournalOptions options;
  options.compact_floor = 0;
  auto journal = StateJournal::Create(SampleState(), 1, store.Hooks(), options);
  ASSERT_TRUE(journal.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        BufferEntry buffer = SampleBuffer(100 + t, 1, 65536 + t * 4096);
        buffer.attrs["step"] = std::to_string(i);
        const std::vector<Change> batch = {buffer};
        EXPECT_TRUE((*journal)->Record(batch).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const DurableState state = (*journal)->state();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(state.buffers.at(100 + t).attrs.at("step"), "199");
  EXPECT_EQ(LoadStored(store), state);
}

// Not a benchmark that can fail: prints Record's median for a one-buffer
// batch, the cost each broker change pays.
TEST(StateJournalTest, PrintsRecordMedian) {
  FakeStore store;
  auto journal = StateJournal::Create(SampleState(), 1, store.Hooks());
  ASSERT_TRUE(journal.ok());
  constexpr int kRecords = 20000;
  std::vector<std::int64_t> ns;
  ns.reserve(kRecords);
  for (int i = 0; i < kRecords; ++i) {
    const std::vector<Change> batch = MoveBuffer(i);
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE((*journal)->Record(std::span<const Change>(batch.data(), 1)).ok());
    ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ns.begin(), ns.end());
  std::printf("Record, one buffer: p50 %lld ns, p99 %lld ns, max %lld ns; %llu compactions\n",
              static_cast<long long>(ns[kRecords / 2]),
              static_cast<long long>(ns[kRecords * 99 / 100]),
              static_cast<long long>(ns.back()),
              static_cast<unsigned long long>((*journal)->epoch() - 1));
}

TEST(LoadNewestTest, NoStateFileIsNotFound) {
  const std::vector<NamedFd> fds = {{"memd.segment.1", 0}};
  EXPECT_EQ(LoadNewest(fds).status().code(), absl::StatusCode::kNotFound);
}

TEST(LoadNewestTest, AnUnreadableNewestIsDataLossEvenWithAReadableOlder) {
  absl::StatusOr<StateFile> older = StateFile::Create(SampleState(), 1);
  absl::StatusOr<StateFile> newer = StateFile::Create(SampleState(), 2);
  ASSERT_TRUE(older.ok() && newer.ok());
  const std::uint8_t garbage = 0;
  ASSERT_EQ(::pwrite(newer->fd(), &garbage, 1, 0), 1);
  const std::vector<NamedFd> fds = {
      {"memd.state.1", older->fd()}, {"memd.state.2", newer->fd()}, {"memd.segment.4", -1}};
  absl::Status status = LoadNewest(fds).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("the newest state file memd.state.2 does not load"));
}

TEST(LoadNewestTest, AnotherVersionStaysFailedPrecondition) {
  absl::StatusOr<StateFile> file = StateFile::Create(SampleState(), 1);
  ASSERT_TRUE(file.ok());
  const std::uint32_t version = 9;
  ASSERT_EQ(::pwrite(file->fd(), &version, 4, 8), 4);
  const std::vector<NamedFd> fds = {{"memd.state.1", file->fd()}};
  EXPECT_EQ(LoadNewest(fds).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(LoadNewestTest, TwoFilesOfTheNewestEpochAreDataLoss) {
  absl::StatusOr<StateFile> a = StateFile::Create(SampleState(), 2);
  absl::StatusOr<StateFile> b = StateFile::Create(SampleState(), 2);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<NamedFd> fds = {{"memd.state.2", a->fd()}, {"memd.state.2", b->fd()}};
  EXPECT_EQ(LoadNewest(fds).status().code(), absl::StatusCode::kDataLoss);
}

TEST(LoadNewestTest, ANameThatIsNotItsEpochIsDataLoss) {
  absl::StatusOr<StateFile> file = StateFile::Create(SampleState(), 3);
  ASSERT_TRUE(file.ok());
  const std::vector<NamedFd> fds = {{"memd.state.4", file->fd()}};
  absl::Status status = LoadNewest(fds).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("is of epoch 3"));
}

TEST(LoadNewestTest, MalformedStateNamesAreSkippedWithTheReason) {
  absl::StatusOr<StateFile> file = StateFile::Create(SampleState(), 3);
  ASSERT_TRUE(file.ok());
  const std::vector<NamedFd> fds = {{"memd.state.x", -1}, {"memd.state.3", file->fd()}};
  absl::StatusOr<NewestState> newest = LoadNewest(fds);
  ASSERT_TRUE(newest.ok()) << newest.status();
  ASSERT_EQ(newest->skipped.size(), 1u);
  EXPECT_EQ(newest->skipped[0].name, "memd.state.x");
}

}  // namespace
}  // namespace memd::durable
