// The Recorder's share of the descriptor store per uid
// (durable_segments_per_uid): what it stores as segments come, change
// domain and go. The store is a MirrorStore with no upstream, whose kept
// names are what a systemd store would hold.

#include "daemon/durable/recorder.h"

#include <sys/mman.h>

#include <algorithm>
#include <string>
#include <vector>

#include "daemon/durable/mirror_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::durable {
namespace {

using ::testing::ElementsAre;

class RecorderTest : public ::testing::Test {
 protected:
  RecorderTest() : store_(nullptr), recorder_(store_, [](const Location&) { return ""; }, 1) {
    EXPECT_TRUE(recorder_.Begin(DurableState(), 1, {}).ok());
  }

  // A host segment of `uid`'s domain, as a pool reports it.
  void Add(std::uint64_t id, uid_t uid) {
    UniqueFd fd(::memfd_create("recorder-test", MFD_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    recorder_.SegmentAdded(Record(id, uid), fd.get());
  }
  static pool::SegmentRecord Record(std::uint64_t id, uid_t uid) {
    pool::SegmentRecord record;
    record.id = id;
    record.location = Location::Host();
    record.bytes = 4096;
    record.domain = pool::Domain{uid, uid, 0600};
    return record;
  }

  // The segments in the store, by name, in order.
  std::vector<std::string> Stored() const {
    std::vector<std::string> names;
    for (const PassedFd& fd : store_.HandOff()) {
      if (fd.name.starts_with("memd.segment.")) names.emplace_back(fd.name);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  MirrorStore store_;
  Recorder recorder_;
};

TEST_F(RecorderTest, AUidPastItsShareIsNotStoredAndOthersStillAre) {
  Add(1, 1000);
  Add(2, 1000);  // Past Alice's one: not kept.
  Add(3, 1001);
  EXPECT_THAT(Stored(), ElementsAre("memd.segment.1", "memd.segment.3"));
  // Her slot comes back with her segment.
  recorder_.SegmentRemoved(1);
  Add(4, 1000);
  EXPECT_THAT(Stored(), ElementsAre("memd.segment.3", "memd.segment.4"));
}

TEST_F(RecorderTest, ASegmentScrubbedForAnotherUidMovesToItsShareOrLeaves) {
  Add(1, 1000);
  Add(2, 1001);
  // Bob's segment now serves Alice, who has no slot left: it leaves the
  // store, and Bob's slot is free again.
  recorder_.SegmentChanged(Record(2, 1000));
  EXPECT_THAT(Stored(), ElementsAre("memd.segment.1"));
  Add(3, 1001);
  EXPECT_THAT(Stored(), ElementsAre("memd.segment.1", "memd.segment.3"));
  // Alice's segment now serves Carol, who has a slot: it stays, moved.
  recorder_.SegmentChanged(Record(1, 1002));
  Add(4, 1000);  // Alice's slot is free again.
  Add(5, 1002);  // Carol's is taken.
  EXPECT_THAT(Stored(), ElementsAre("memd.segment.1", "memd.segment.3", "memd.segment.4"));
}

}  // namespace
}  // namespace memd::durable
