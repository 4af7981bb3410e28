// Issue 22, finding 2: Seal neither waited for nor refused copies still
// writing the buffer. A producer that queued a copy into its buffer and
// sealed at once published a buffer whose bytes changed after the seal;
// another uid allowed to write the buffer queued a copy into it behind a
// chain of its own, released its lease, and its bytes landed in the sealed
// buffer seconds later.
//
// A seal is now refused (FAILED_PRECONDITION) while any copy may still write
// the buffer, naming the caller's own transfers; once it succeeds, no byte
// of the buffer changes through memd.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/security/held_attack.h"
#include "tests/security/slow_copies.h"
#include "tests/support/poll_until.h"

namespace memd {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using test::Describe;
using test::HeldAttack;
using test::kMallory;
using test::kMiB;
using test::PollUntil;
using test::RawSession;

class SealedUnderCopiesTest : public test::SlowCopyDaemonTest {};

TEST_F(SealedUnderCopiesTest, AProducerCannotSealWhileItsCopyStillWritesTheBuffer) {
  StartSlowDaemon();
  RawSession producer = Session();
  v1::Lease source = Create(producer, "weights/staged", 64 * kMiB);
  v1::Lease weights = Create(producer, "weights", 64 * kMiB, "device:0");
  const std::uint64_t copy = Copy(producer, source.lease_id(), weights.lease_id(), 64 * kMiB);

  grpc::Status sealed = Seal(producer, weights.lease_id());
  EXPECT_EQ(sealed.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(sealed.error_message(),
            "buffer 'weights' cannot be sealed: 1 copy may still write it; wait for them to "
            "end (or cancel them), then seal (this session's: transfer " +
                std::to_string(copy) + ")");

  // Cancelled, the copy lets go once its chunks on the device drained.
  v1::CancelTransferRequest cancel;
  cancel.set_transfer_id(copy);
  v1::TransferProgress progress;
  ASSERT_TRUE(producer.Call(&v1::Memd::Stub::CancelTransfer, cancel, &progress).ok());
  EXPECT_TRUE(PollUntil([&] { return Seal(producer, weights.lease_id()).ok(); }));
}

TEST_F(SealedUnderCopiesTest, AnotherUidsQueuedCopyCannotChangeABufferAfterItsSeal) {
  StartSlowDaemon();
  RawSession producer = Session();
  v1::Lease shared = Create(producer, "producer/shared", 32 * kMiB, "host", 0666,
                            /*keep_descriptor=*/true);
  ASSERT_TRUE(Write(producer, shared, "ORIGINAL-CONTENT"));

  HeldAttack attack(kMallory, config_.socket_dir,
                    {"write_behind_chain", "producer/shared", std::to_string(32 * kMiB),
                     "ATTACKER-WROTE!!"},
                    Gate("gate"));
  ASSERT_EQ(attack.Report(), "queued\n") << Describe(attack.Release());

  grpc::Status refused = Seal(producer, shared.lease_id());
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(),
              AllOf(HasSubstr("2 copies may still write it"),
                    Not(HasSubstr("this session's"))))
      << "another session's transfer ids are not the producer's to know";

  ASSERT_TRUE(PollUntil([&] { return Seal(producer, shared.lease_id()).ok(); },
                        absl::Seconds(60)));
  const std::string at_seal = Read(producer, "producer/shared", 16);
  // Whatever the copies of others could still do, they have done by now.
  EXPECT_TRUE(PollUntil([&] { return Stats(producer).transfers().active() == 0; }));
  EXPECT_EQ(Read(producer, "producer/shared", 16), at_seal)
      << "a byte of the sealed buffer changed";
  EXPECT_EQ(attack.Release().exit_code, 0) << Describe(attack.Release());
}

}  // namespace
}  // namespace memd
