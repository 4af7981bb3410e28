// Calls that wait for memory at a full location (issue 26), through
// libmemd against a daemon in this process: creates, OpenOrCreates, and the
// copies opens and prefetches make at a location. Each is served when a
// buffer there goes, shows in Stats meanwhile, and past its wait says what
// was free.

#include <future>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/client/in_process_daemon.h"
#include "tests/client/pattern.h"
#include "tests/support/poll_until.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1 << 20;

// A host pool of 256 MiB, and four 64 MiB buffers to fill it.
class ClientMemoryWaitTest : public test::InProcessDaemonTest {
 protected:
  void SetUp() override {
    config_.max_buffer_bytes = 64 * kMiB;
    config_.host_pool_limit_bytes = 256 * kMiB;
    StartDaemon();
  }

  // Fills the host with four sealed buffers nobody holds and that may not
  // give way (full/0 .. full/3).
  void FillHost() {
    for (int i = 0; i < 4; ++i) Publish(absl::StrCat("full/", i), kSize, i);
  }

  static constexpr std::uint64_t kSize = 64 * kMiB;
};

// A create at a full location may wait for memory (issue 26): served when a
// buffer there goes; past its wait, DEADLINE_EXCEEDED with the numbers.
TEST_F(ClientMemoryWaitTest, ACreateAtAFullHostWaitsForMemoryAndIsServedWhenABufferGoes) {
  const std::uint64_t size = kSize;
  FillHost();

  auto late = client_->Create("full/late", size, {.wait_for_memory = absl::Milliseconds(50)});
  ASSERT_TRUE(absl::IsDeadlineExceeded(late.status())) << late.status();
  EXPECT_THAT(std::string(late.status().message()),
              AllOf(HasSubstr("no room for buffer 'full/late' (64 MiB) at host within 50ms"),
                    HasSubstr("0 B of 256 MiB free there"), HasSubstr("held by uid ")));

  absl::StatusOr<Buffer> waited = absl::UnknownError("not yet");
  std::thread waiter([&] {
    waited = client_->Create("full/late", size, {.wait_for_memory = absl::Seconds(60)});
  });
  ASSERT_TRUE(test::PollUntil([&] { return client_->Stats()->waits == 1; }));
  // Stats say where it waits and for how much.
  const auto waiting = client_->Stats();
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  ASSERT_EQ(waiting->memory_waits.size(), 1u);
  EXPECT_EQ(waiting->memory_waits[0].location, "host");
  EXPECT_EQ(waiting->memory_waits[0].calls, 1u);
  EXPECT_EQ(waiting->memory_waits[0].bytes, size);
  ASSERT_TRUE(client_->Unlink("full/2").ok());
  waiter.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(waited->size(), size);
  EXPECT_EQ(client_->Stats()->waits, 0u);
  EXPECT_TRUE(client_->Stats()->memory_waits.empty());
}

// OpenOrCreate waits for memory when it would create (issue 26), and opens
// what another creates meanwhile; past its wait it says what was free.
TEST_F(ClientMemoryWaitTest, AnOpenOrCreateAtAFullHostWaitsForMemoryOrForTheNamesCreator) {
  const std::uint64_t size = kSize;
  FillHost();

  auto late = client_->OpenOrCreate("either/late", size,
                                    {.wait_for_memory = absl::Milliseconds(50)});
  ASSERT_TRUE(absl::IsDeadlineExceeded(late.status())) << late.status();
  EXPECT_THAT(std::string(late.status().message()),
              HasSubstr("no room for buffer 'either/late' (64 MiB) at host within 50ms"));

  // Served when memory comes: it creates.
  absl::StatusOr<Buffer> made = absl::UnknownError("not yet");
  std::thread maker([&] {
    made = client_->OpenOrCreate("either/made", size, {.wait_for_memory = absl::Seconds(60)});
  });
  ASSERT_TRUE(test::PollUntil([&] { return client_->Stats()->waits == 1; }));
  ASSERT_EQ(client_->Stats()->memory_waits.size(), 1u);
  ASSERT_TRUE(client_->Unlink("full/0").ok());
  maker.join();
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(made->created());

  // Two race for the name when room comes: one waited for memory, the other
  // arrives as it is freed. Whichever creates, the other opens that buffer
  // once it is sealed: one buffer, one creator, and no memory taken twice.
  auto other = Client::Connect({.socket_dir = config_.socket_dir});
  ASSERT_TRUE(other.ok()) << other.status();
  auto racer = [size](Client& client) {
    return client.OpenOrCreate("either/shared", size, {.wait_for_memory = absl::Seconds(60)},
                               absl::Seconds(60));
  };
  auto waited = std::async(std::launch::async, racer, std::ref(*client_));
  ASSERT_TRUE(test::PollUntil([&] { return client_->Stats()->memory_waits.size() == 1; }));
  ASSERT_TRUE((*other)->Unlink("full/1").ok());
  auto arrived = std::async(std::launch::async, racer, std::ref(**other));
  // The creator answers first; the other waits for its seal.
  ASSERT_TRUE(test::PollUntil([&] {
    return waited.wait_for(std::chrono::seconds(0)) == std::future_status::ready ||
           arrived.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }));
  const bool waiter_created =
      waited.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  absl::StatusOr<Buffer> creator = (waiter_created ? waited : arrived).get();
  ASSERT_TRUE(creator.ok()) << creator.status();
  EXPECT_TRUE(creator->created());
  ASSERT_TRUE(creator->Seal().ok());
  absl::StatusOr<Buffer> opener = (waiter_created ? arrived : waited).get();
  ASSERT_TRUE(opener.ok()) << opener.status();
  EXPECT_FALSE(opener->created());
  EXPECT_EQ(opener->info().id, creator->info().id);
  EXPECT_TRUE(client_->Stats()->memory_waits.empty());
}

// An open at a full location waits for memory for its copy (issue 26), in
// the same queue as creates, and then for the copy; past its wait it says
// what was free. Here a pinned buffer's copy at the full host.
TEST_F(ClientMemoryWaitTest, AnOpenAtAFullLocationWaitsForMemoryForItsCopy) {
  Publish("copy/src", kSize, 7, {.location = "pinned"});
  FillHost();
  auto at_once = client_->Open("copy/src", {.location = "host"});
  ASSERT_TRUE(absl::IsResourceExhausted(at_once.status())) << at_once.status();
  auto late = client_->Open("copy/src", {.location = "host",
                                         .wait_for_memory = absl::Milliseconds(50)});
  ASSERT_TRUE(absl::IsDeadlineExceeded(late.status())) << late.status();
  EXPECT_THAT(std::string(late.status().message()),
              AllOf(HasSubstr("no room for a copy of buffer 'copy/src' (64 MiB) at host "
                              "within 50ms"),
                    HasSubstr("0 B of 256 MiB free there")));

  absl::StatusOr<Buffer> opened = absl::UnknownError("not yet");
  std::thread opener([&] {
    opened = client_->Open("copy/src",
                           {.location = "host", .wait_for_memory = absl::Seconds(60)});
  });
  ASSERT_TRUE(test::PollUntil([&] { return client_->Stats()->memory_waits.size() == 1; }));
  const auto waiting = client_->Stats();
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->memory_waits[0].location, "host");
  EXPECT_EQ(waiting->memory_waits[0].calls, 1u);
  EXPECT_EQ(waiting->memory_waits[0].bytes, kSize);
  ASSERT_TRUE(client_->Unlink("full/3").ok());
  opener.join();
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->info().location, "host");
  EXPECT_TRUE(test::MatchesPattern(opened->data(), 7));
  EXPECT_TRUE(client_->Stats()->memory_waits.empty());
}

// A prefetch waits for memory the same way, then for its copy to be current.
TEST_F(ClientMemoryWaitTest, APrefetchToAFullLocationWaitsForMemoryThenForTheCopy) {
  Publish("prefetch/src", kSize, 9, {.location = "pinned"});
  FillHost();
  auto at_once = client_->Prefetch("prefetch/src", "host");
  ASSERT_TRUE(absl::IsResourceExhausted(at_once.status())) << at_once.status();

  auto prefetched = std::async(std::launch::async, [&] {
    return client_->Prefetch("prefetch/src", "host", {.wait_for_memory = absl::Seconds(60)});
  });
  ASSERT_TRUE(test::PollUntil([&] { return client_->Stats()->memory_waits.size() == 1; }));
  ASSERT_TRUE(client_->Unlink("full/0").ok());
  absl::StatusOr<BufferInfo> info = prefetched.get();
  ASSERT_TRUE(info.ok()) << info.status();
  bool current_at_host = false;
  for (const ReplicaInfo& replica : info->replicas) {
    current_at_host = current_at_host || (replica.location == "host" && replica.state == "current");
  }
  EXPECT_TRUE(current_at_host) << "the call waited for the copy, not only for memory";
  auto read = client_->Open("prefetch/src", {.location = "host"});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(test::MatchesPattern(read->data(), 9));
}

// Only a copy takes memory: an open where the buffer is has nothing to wait
// for, and says so rather than ignore the wait.
TEST_F(ClientMemoryWaitTest, AWaitForMemoryWithoutALocationIsInvalid) {
  Publish("here", kMiB, 1);
  auto opened = client_->Open("here", {.wait_for_memory = absl::Seconds(1)});
  ASSERT_TRUE(absl::IsInvalidArgument(opened.status())) << opened.status();
  EXPECT_THAT(std::string(opened.status().message()),
              HasSubstr("wait_for_memory_ms 1000 needs a location"));
}

}  // namespace
}  // namespace memd
