// memd's own copy of what it stores (daemon/durable/mirror_store.h): what
// an upgrade by exec hands on, with or without a manager's store beneath.

#include "daemon/durable/mirror_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::durable {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// What an upstream store was asked, as "store NAME xN" and "remove NAME".
class RecordingStore : public FdStore {
 public:
  explicit RecordingStore(std::vector<std::string>& log) : log_(log) {}
  absl::Status Store(std::string_view name, int fd) override { return StoreMany(name, {&fd, 1}); }
  absl::Status StoreMany(std::string_view name, std::span<const int> fds) override {
    log_.push_back("store " + std::string(name) + " x" + std::to_string(fds.size()));
    return absl::OkStatus();
  }
  absl::Status Remove(std::string_view name) override {
    log_.push_back("remove " + std::string(name));
    return absl::OkStatus();
  }

 private:
  std::vector<std::string>& log_;
};

UniqueFd Memfd() { return UniqueFd(::memfd_create("mirror-test", MFD_CLOEXEC)); }

// Whether `a` and `b` are the same open file (a dup of it).
bool SameFile(int a, int b) {
  struct stat sa, sb;
  return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_ino == sb.st_ino &&
         sa.st_dev == sb.st_dev;
}

TEST(MirrorStoreTest, KeepsItsOwnDupsForAnUpgradeAndForwardsToTheManager) {
  std::vector<std::string> upstream;
  MirrorStore store(std::make_unique<RecordingStore>(upstream));
  EXPECT_TRUE(store.has_upstream());
  UniqueFd segment = Memfd();
  UniqueFd state = Memfd();
  ASSERT_TRUE(store.Store("memd.segment.7", segment.get()).ok());
  ASSERT_TRUE(store.Store("memd.state.1", state.get()).ok());
  // Taken back at a start: the manager holds it already.
  UniqueFd adopted = Memfd();
  ASSERT_TRUE(store.Keep("memd.segment.3", adopted.get()).ok());
  EXPECT_THAT(upstream, ElementsAre("store memd.segment.7 x1", "store memd.state.1 x1"));

  // The originals may go: the store's dups keep the files.
  const int segment_number = segment.get();
  struct stat before;
  ASSERT_EQ(::fstat(segment_number, &before), 0);
  std::vector<PassedFd> handed = store.HandOff();
  ASSERT_EQ(handed.size(), 3u);
  std::map<std::string, int> by_name;
  for (const PassedFd& fd : handed) by_name[std::string(fd.name)] = fd.fd;
  EXPECT_TRUE(SameFile(by_name.at("memd.segment.7"), segment.get()));
  EXPECT_TRUE(SameFile(by_name.at("memd.state.1"), state.get()));
  EXPECT_TRUE(SameFile(by_name.at("memd.segment.3"), adopted.get()));
  EXPECT_NE(by_name.at("memd.segment.7"), segment_number);  // A dup, not the caller's.

  ASSERT_TRUE(store.Remove("memd.segment.7").ok());
  ASSERT_TRUE(store.Remove("memd.segment.3").ok());
  EXPECT_THAT(upstream, ElementsAre("store memd.segment.7 x1", "store memd.state.1 x1",
                                    "remove memd.segment.7", "remove memd.segment.3"));
  handed = store.HandOff();
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_EQ(handed[0].name, "memd.state.1");
  EXPECT_EQ(::fcntl(by_name.at("memd.segment.7"), F_GETFD), -1) << "its dup was not closed";
}

TEST(MirrorStoreTest, WithoutAManagerItStillKeepsWhatAnUpgradeNeeds) {
  MirrorStore store(nullptr);
  EXPECT_FALSE(store.has_upstream());
  UniqueFd segment = Memfd();
  ASSERT_TRUE(store.Store("memd.segment.1", segment.get()).ok());
  ASSERT_EQ(store.HandOff().size(), 1u);
  ASSERT_TRUE(store.Remove("memd.segment.1").ok());
  EXPECT_THAT(store.HandOff(), IsEmpty());
}

TEST(MirrorStoreTest, NamesTheManagerWouldRefuseAndBadDescriptorsAreRefusedHereFirst) {
  std::vector<std::string> upstream;
  MirrorStore store(std::make_unique<RecordingStore>(upstream));
  UniqueFd fd = Memfd();
  EXPECT_EQ(store.Store("memd:segment", fd.get()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Keep("", fd.get()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(store.Store("memd.segment.9", 987654).ok());  // Not an open descriptor.
  EXPECT_THAT(upstream, IsEmpty());
  EXPECT_THAT(store.HandOff(), IsEmpty());
}

}  // namespace
}  // namespace memd::durable
