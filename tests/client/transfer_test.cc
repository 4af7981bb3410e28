// Client::Copy and Transfer against a real daemon in this process, with host
// buffers: bytes, regions, progress, refusals with their numbers, transfers
// private to their session, admission. (Slow and device copies, on the fake
// CUDA driver: transfer_cuda_test.cc.)

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "memd/v1/memd.grpc.pb.h"
#include "tests/client/in_process_daemon.h"
#include "tests/client/pattern.h"
#include "tests/support/poll_until.h"
#include "tests/support/raw_session.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1 << 20;

std::string Message(const absl::Status& status) { return std::string(status.message()); }

class TransferTest : public test::InProcessDaemonTest {
 protected:
  void SetUp() override {
    config_.max_buffer_bytes = 64 * kMiB;
    config_.host_pool_limit_bytes = 512 * kMiB;
  }

  // A writable buffer filled with the pattern of `seed` (0: zeros).
  Buffer Make(const std::string& name, std::uint64_t size, std::uint32_t seed = 0) {
    auto buffer = client_->Create(name, size);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return Buffer();
    if (seed != 0) test::FillPattern(buffer->mutable_data(), seed);
    return std::move(*buffer);
  }

  DaemonStats Stats() {
    auto stats = client_->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? *stats : DaemonStats{};
  }
};

class HostTransferTest : public TransferTest {
 protected:
  void SetUp() override {
    TransferTest::SetUp();
    StartDaemon();
  }
};

TEST_F(HostTransferTest, AHostToHostCopyMovesEveryByte) {
  const std::uint64_t size = 9 * kMiB + 123;  // Chunks and a ragged end.
  Buffer source = Make("src", size, 7);
  Buffer destination = Make("dst", size);
  auto transfer = client_->Copy({&source}, {&destination});
  ASSERT_TRUE(transfer.ok()) << transfer.status();
  EXPECT_TRUE(*transfer);
  EXPECT_NE(transfer->id(), 0u);
  ASSERT_TRUE(transfer->Wait().ok());
  EXPECT_TRUE(test::MatchesPattern(destination.data(), 7));

  auto progress = transfer->Progress();
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ(progress->id, transfer->id());
  EXPECT_EQ(progress->state, TransferState::kDone);
  EXPECT_TRUE(progress->finished());
  EXPECT_EQ(progress->bytes_done, size);
  EXPECT_EQ(progress->bytes_total, size);
  EXPECT_EQ(progress->direction, "h2h");
  EXPECT_EQ(progress->path, "cpu");
  EXPECT_EQ(progress->device, -1);
  EXPECT_TRUE(progress->status.ok()) << progress->status;
  EXPECT_GE(progress->elapsed, absl::ZeroDuration());
}

TEST_F(HostTransferTest, RegionsCopyOnlyTheirBytes) {
  Buffer source = Make("src", 64 * 1024, 3);
  Buffer destination = Make("dst", 64 * 1024);
  auto transfer = client_->Copy({&source, 1000, 5000}, {&destination, 20000, 5000});
  ASSERT_TRUE(transfer.ok()) << transfer.status();
  ASSERT_TRUE(transfer->Wait().ok());
  auto bytes = destination.data();
  EXPECT_EQ(std::memcmp(bytes.data() + 20000, source.data().data() + 1000, 5000), 0);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i >= 20000 && i < 25000) continue;
    ASSERT_EQ(bytes[i], std::byte{0}) << "byte " << i << " outside the region changed";
  }
}

TEST_F(HostTransferTest, AnUnsetLengthIsTheRestOfTheBuffer) {
  Buffer source = Make("src", 10000, 5);
  Buffer destination = Make("dst", 4000);
  // 6000..10000 of the source: 4000 bytes, the whole destination.
  auto transfer = client_->Copy({&source, 6000}, {&destination});
  ASSERT_TRUE(transfer.ok()) << transfer.status();
  ASSERT_TRUE(transfer->Wait().ok());
  EXPECT_EQ(std::memcmp(destination.data().data(), source.data().data() + 6000, 4000), 0);
  EXPECT_EQ(transfer->Progress()->bytes_total, 4000u);
}

TEST_F(HostTransferTest, ANullOrReleasedBufferIsAnInvalidArgument) {
  Buffer source = Make("src", 4096, 1);
  Buffer destination = Make("dst", 4096);
  auto null = client_->Copy({nullptr}, {&destination});
  EXPECT_TRUE(absl::IsInvalidArgument(null.status())) << null.status();
  EXPECT_THAT(Message(null.status()), HasSubstr("source names no buffer"));
  ASSERT_TRUE(destination.Release().ok());
  auto released = client_->Copy({&source}, {&destination});
  EXPECT_TRUE(absl::IsInvalidArgument(released.status())) << released.status();
  EXPECT_THAT(Message(released.status()), HasSubstr("destination Buffer holds no lease"));
}

TEST_F(HostTransferTest, AnOffsetPastTheEndIsRefusedBeforeTheCall) {
  Buffer source = Make("src", 4096, 1);
  Buffer destination = Make("dst", 4096);
  auto past = client_->Copy({&source, 5000}, {&destination});
  EXPECT_TRUE(absl::IsInvalidArgument(past.status())) << past.status();
  EXPECT_THAT(Message(past.status()), AllOf(HasSubstr("5000"), HasSubstr("4096")));
}

TEST_F(HostTransferTest, ABufferOfAnotherClientIsAnInvalidArgument) {
  auto other = Connect();
  auto theirs = other->Create("theirs", 4096);
  ASSERT_TRUE(theirs.ok());
  Buffer mine = Make("mine", 4096);
  auto refused = client_->Copy({&*theirs}, {&mine});
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(Message(refused.status()), HasSubstr("another Client"));
}

TEST_F(HostTransferTest, RegionsOutOfBoundsAreRefusedWithTheNumbers) {
  Buffer source = Make("src", 8192, 1);
  Buffer destination = Make("dst", 4096);
  auto past = client_->Copy({&source, 0, 6000}, {&destination, 0, 6000});
  EXPECT_TRUE(absl::IsInvalidArgument(past.status())) << past.status();
  EXPECT_THAT(Message(past.status()),
              AllOf(HasSubstr("destination"), HasSubstr("6000"), HasSubstr("4096")));
  auto differ = client_->Copy({&source}, {&destination});  // 8192 vs 4096.
  EXPECT_TRUE(absl::IsInvalidArgument(differ.status())) << differ.status();
  EXPECT_THAT(Message(differ.status()), AllOf(HasSubstr("8192"), HasSubstr("4096")));
  auto empty = client_->Copy({&source, 8192}, {&destination, 4096});
  EXPECT_TRUE(absl::IsInvalidArgument(empty.status())) << empty.status();
  EXPECT_TRUE(Stats().transfers.active == 0);
}

TEST_F(HostTransferTest, AnOverflowingRegionIsRefusedNotWrapped) {
  Buffer source = Make("src", 8192, 1);
  Buffer destination = Make("dst", 8192);
  const std::uint64_t huge = ~std::uint64_t{0} - 10;  // 16 + huge wraps to 5.
  auto wrapped = client_->Copy({&source, 16, huge}, {&destination, 0, huge});
  EXPECT_TRUE(absl::IsInvalidArgument(wrapped.status())) << wrapped.status();
  EXPECT_THAT(Message(wrapped.status()), HasSubstr(std::to_string(huge)));
}

TEST_F(HostTransferTest, AReadOnlyDestinationIsRefused) {
  Buffer published = Make("published", 4096, 2);
  ASSERT_TRUE(published.Seal().ok());
  auto reader = client_->Open("published");
  ASSERT_TRUE(reader.ok());
  Buffer source = Make("src", 4096, 1);
  auto refused = client_->Copy({&source}, {&*reader});
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(Message(refused.status()), HasSubstr("read-only"));
  EXPECT_TRUE(test::MatchesPattern(reader->data(), 2));
}

TEST_F(HostTransferTest, ASealedDestinationIsRefused) {
  Buffer source = Make("src", 4096, 1);
  Buffer destination = Make("dst", 4096, 2);
  ASSERT_TRUE(destination.Seal().ok());
  auto refused = client_->Copy({&source}, {&destination});
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(Message(refused.status()), AllOf(HasSubstr("'dst'"), HasSubstr("sealed")));
  EXPECT_TRUE(test::MatchesPattern(destination.data(), 2));
}

TEST_F(HostTransferTest, ASealedSourceCopiesOut) {
  Buffer source = Make("src", 4096, 4);
  ASSERT_TRUE(source.Seal().ok());
  auto reader = client_->Open("src");
  ASSERT_TRUE(reader.ok());
  Buffer destination = Make("dst", 4096);
  auto transfer = client_->Copy({&*reader}, {&destination});
  ASSERT_TRUE(transfer.ok()) << transfer.status();
  ASSERT_TRUE(transfer->Wait().ok());
  EXPECT_TRUE(test::MatchesPattern(destination.data(), 4));
}

TEST_F(HostTransferTest, CancellingAFinishedCopyChangesNothing) {
  Buffer source = Make("src", 4096, 1);
  Buffer destination = Make("dst", 4096);
  auto transfer = client_->Copy({&source}, {&destination});
  ASSERT_TRUE(transfer.ok());
  ASSERT_TRUE(transfer->Wait().ok());
  EXPECT_TRUE(transfer->Cancel().ok());
  EXPECT_EQ(transfer->Progress()->state, TransferState::kDone);
  EXPECT_TRUE(transfer->Wait().ok());
}

TEST_F(HostTransferTest, AnEmptyTransferSaysSo) {
  Transfer empty;
  EXPECT_FALSE(empty);
  EXPECT_TRUE(absl::IsFailedPrecondition(empty.Wait()));
  EXPECT_TRUE(absl::IsFailedPrecondition(empty.Progress().status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(empty.Cancel()));
}

TEST_F(HostTransferTest, StatsCountFinishedCopiesAndTheirBytes) {
  Buffer source = Make("src", 3 * kMiB, 1);
  Buffer destination = Make("dst", 3 * kMiB);
  for (int i = 0; i < 2; ++i) {
    auto transfer = client_->Copy({&source}, {&destination});
    ASSERT_TRUE(transfer.ok());
    ASSERT_TRUE(transfer->Wait().ok());
  }
  const TransferStats stats = Stats().transfers;
  EXPECT_EQ(stats.completed, 2u);
  EXPECT_EQ(stats.bytes, 6 * kMiB);
  EXPECT_EQ(stats.active, 0u);
  EXPECT_EQ(stats.active_bytes, 0u);
  EXPECT_EQ(stats.failed, 0u);
}

// Raw sessions: what libmemd would never send.
class RawTransferTest : public HostTransferTest {
 protected:
  // A writable host buffer of the raw session, its lease id.
  std::uint64_t RawCreate(const test::RawSession& session, const std::string& name,
                          std::uint64_t size) {
    v1::CreateRequest request;
    request.set_name(name);
    request.set_size_bytes(size);
    v1::Lease lease;
    grpc::Status status = session.Call(&v1::Memd::Stub::Create, request, &lease);
    EXPECT_TRUE(status.ok()) << status.error_message();
    session.Drain();
    return lease.lease_id();
  }

  static v1::CopyRequest CopyOf(std::uint64_t source, std::uint64_t destination,
                                std::uint64_t length) {
    v1::CopyRequest request;
    request.mutable_source()->set_lease_id(source);
    request.mutable_source()->set_length(length);
    request.mutable_destination()->set_lease_id(destination);
    request.mutable_destination()->set_length(length);
    return request;
  }
};

TEST_F(RawTransferTest, AnotherSessionCanNeitherSeeNorCancelATransfer) {
  test::RawSession owner = test::RawSession::Open(config_.socket_dir);
  test::RawSession other = test::RawSession::Open(config_.socket_dir);
  const std::uint64_t source = RawCreate(owner, "src", kMiB);
  const std::uint64_t destination = RawCreate(owner, "dst", kMiB);
  v1::CopyReply copied;
  ASSERT_TRUE(owner.Call(&v1::Memd::Stub::Copy, CopyOf(source, destination, kMiB), &copied)
                  .ok());

  v1::WaitTransferRequest wait;
  wait.set_transfer_id(copied.transfer_id());
  v1::TransferProgress progress;
  grpc::Status seen = other.Call(&v1::Memd::Stub::WaitTransfer, wait, &progress);
  EXPECT_EQ(seen.error_code(), grpc::StatusCode::NOT_FOUND) << seen.error_message();
  wait.set_wait_ms(1000);
  seen = other.Call(&v1::Memd::Stub::WaitTransfer, wait, &progress);
  EXPECT_EQ(seen.error_code(), grpc::StatusCode::NOT_FOUND) << seen.error_message();
  v1::CancelTransferRequest cancel;
  cancel.set_transfer_id(copied.transfer_id());
  grpc::Status cancelled = other.Call(&v1::Memd::Stub::CancelTransfer, cancel, &progress);
  EXPECT_EQ(cancelled.error_code(), grpc::StatusCode::NOT_FOUND);
  // The same answer as for an id nobody has.
  cancel.set_transfer_id(copied.transfer_id() + 1000);
  grpc::Status unknown = other.Call(&v1::Memd::Stub::CancelTransfer, cancel, &progress);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);

  // The owner's copy is untouched.
  wait.set_wait_ms(10000);
  ASSERT_TRUE(owner.Call(&v1::Memd::Stub::WaitTransfer, wait, &progress).ok());
  EXPECT_EQ(progress.state(), v1::TRANSFER_DONE);
  EXPECT_EQ(progress.bytes_done(), kMiB);
}

TEST_F(RawTransferTest, AnotherSessionsLeasesAreUnknownToACopy) {
  test::RawSession owner = test::RawSession::Open(config_.socket_dir);
  test::RawSession thief = test::RawSession::Open(config_.socket_dir);
  const std::uint64_t theirs = RawCreate(owner, "theirs", kMiB);
  const std::uint64_t mine = RawCreate(thief, "mine", kMiB);
  v1::CopyReply copied;
  grpc::Status out = thief.Call(&v1::Memd::Stub::Copy, CopyOf(theirs, mine, kMiB), &copied);
  EXPECT_EQ(out.error_code(), grpc::StatusCode::NOT_FOUND) << out.error_message();
  grpc::Status in = thief.Call(&v1::Memd::Stub::Copy, CopyOf(mine, theirs, kMiB), &copied);
  EXPECT_EQ(in.error_code(), grpc::StatusCode::NOT_FOUND) << in.error_message();
}

TEST_F(RawTransferTest, WaitsBeyondTheMaximumAndUnknownPrioritiesAreRefused) {
  test::RawSession session = test::RawSession::Open(config_.socket_dir);
  const std::uint64_t source = RawCreate(session, "src", kMiB);
  const std::uint64_t destination = RawCreate(session, "dst", kMiB);
  v1::CopyRequest request = CopyOf(source, destination, kMiB);
  request.set_priority(static_cast<v1::TransferPriority>(77));
  v1::CopyReply copied;
  grpc::Status priority = session.Call(&v1::Memd::Stub::Copy, request, &copied);
  EXPECT_EQ(priority.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(priority.error_message(), HasSubstr("77"));

  v1::WaitTransferRequest wait;
  wait.set_transfer_id(1);
  wait.set_wait_ms(~std::uint64_t{0});
  v1::TransferProgress progress;
  grpc::Status long_wait = session.Call(&v1::Memd::Stub::WaitTransfer, wait, &progress);
  EXPECT_EQ(long_wait.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(long_wait.error_message(), HasSubstr("60000"));

  v1::CopyRequest huge_chunk = CopyOf(source, destination, kMiB);
  huge_chunk.set_chunk_bytes(std::uint64_t{1} << 40);
  grpc::Status chunk = session.Call(&v1::Memd::Stub::Copy, huge_chunk, &copied);
  EXPECT_EQ(chunk.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << chunk.error_message();
}

TEST_F(RawTransferTest, ACallWithoutASessionIsUnauthenticated) {
  test::RawSession session = test::RawSession::Open(config_.socket_dir);
  grpc::ClientContext context;
  v1::CopyReply copied;
  grpc::Status status = session.stub->Copy(&context, CopyOf(1, 2, 10), &copied);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

class AdmissionTest : public TransferTest {
 protected:
  void SetUp() override {
    TransferTest::SetUp();
    config_.transfer_max_session_transfers = 2;
    StartDaemon();
  }
};

// Admission counts unfinished transfers: copies into one destination range
// run in submission order, so the later ones wait behind the first.
TEST_F(AdmissionTest, BeyondTheSessionsTransfersCopyIsResourceExhaustedWithTheNumbers) {
  Buffer source = Make("src", 32 * kMiB, 1);
  Buffer destination = Make("dst", 32 * kMiB);
  std::vector<Transfer> admitted;
  absl::Status refused;
  // Some finish before the next is asked for; keep asking until one is
  // refused (at most a few hundred tries of a 32 MiB copy).
  for (int i = 0; i < 200 && refused.ok(); ++i) {
    auto transfer = client_->Copy({&source}, {&destination},
                                  {.priority = Priority::kBackground});
    if (transfer.ok()) {
      admitted.push_back(std::move(*transfer));
    } else {
      refused = transfer.status();
    }
  }
  ASSERT_FALSE(refused.ok()) << "no copy was refused";
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_THAT(Message(refused), HasSubstr("2"));
  for (Transfer& transfer : admitted) EXPECT_TRUE(transfer.Wait().ok());
  EXPECT_GE(Stats().transfers.rejected, 1u);
}

class ByteAdmissionTest : public TransferTest {
 protected:
  void SetUp() override {
    TransferTest::SetUp();
    config_.transfer_max_session_bytes = 2 * kMiB;
    StartDaemon();
  }
};

TEST_F(ByteAdmissionTest, ACopyBeyondTheSessionsBytesIsRefusedWithTheNumbers) {
  Buffer source = Make("src", 3 * kMiB, 1);
  Buffer destination = Make("dst", 3 * kMiB);
  auto refused = client_->Copy({&source}, {&destination});
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(Message(refused.status()),
              AllOf(HasSubstr("3 MiB"), HasSubstr("2 MiB"),
                    HasSubstr("transfer_max_session_bytes")));
  EXPECT_EQ(Stats().transfers.rejected, 1u);
  // Within the limit it runs.
  auto admitted = client_->Copy({&source, 0, 2 * kMiB}, {&destination, 0, 2 * kMiB});
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_TRUE(admitted->Wait().ok());
}

}  // namespace
}  // namespace memd
