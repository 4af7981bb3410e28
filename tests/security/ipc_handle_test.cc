// Finding 14 (issue 9): a legacy CUDA IPC handle (cuda_handles = ipc, or a
// device without VMM fd export) is 64 bytes, not a descriptor: a client that
// once received them can cuIpcOpenMemHandle them whenever it likes, after its
// lease ended too, and reaches whatever then lives in that allocation. memd
// gave the segment back (trim) while such a client lived, or with
// pool_domain_reuse = "scrub" handed it to another owner's buffer, whose
// bytes the old handle then read.
//
// A real memd on the project's fake CUDA driver, in a child process; this
// process plays the clients: raw sessions for the calls, and the fake driver
// loaded here to open the handles as a client process would.

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cuda/driver.h"
#include "gtest/gtest.h"
#include "tests/client/pattern.h"
#include "tests/support/daemon_process.h"
#include "tests/support/poll_until.h"
#include "tests/support/raw_session.h"

namespace memd {
namespace {

using test::DaemonProcess;
using test::RawSession;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kSize = 4 * kMiB;  // A large buffer: a segment of its own.

// The fake driver loaded in this process, with device 0's primary context
// current: what a client process does with the handle bytes it received.
class Importer {
 public:
  static std::unique_ptr<Importer> Load() {
    auto driver = cuda::Driver::Load(MEMD_FAKE_CUDA_PATH);
    EXPECT_TRUE(driver.ok()) << driver.status();
    if (!driver.ok()) return nullptr;
    auto importer = std::unique_ptr<Importer>(new Importer(*std::move(driver)));
    CUcontext context = nullptr;
    EXPECT_EQ(importer->api().DevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
    EXPECT_EQ(importer->api().CtxSetCurrent(context), CUDA_SUCCESS);
    return importer;
  }
  ~Importer() {
    api().CtxSetCurrent(nullptr);
    api().DevicePrimaryCtxRelease(0);
  }

  // cuIpcOpenMemHandle's result (closing it again when it opened).
  CUresult TryOpen(const std::string& handle) const {
    CUdeviceptr base = 0;
    const CUresult opened = api().IpcOpenMemHandle(
        &base, AsHandle(handle), CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (opened == CUDA_SUCCESS) {
      EXPECT_EQ(api().IpcCloseMemHandle(base), CUDA_SUCCESS);
    }
    return opened;
  }

  void Write(const std::string& handle, std::uint64_t offset,
             const std::vector<std::byte>& bytes) const {
    CUdeviceptr base = 0;
    ASSERT_EQ(api().IpcOpenMemHandle(&base, AsHandle(handle),
                                     CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_SUCCESS);
    EXPECT_EQ(api().MemcpyHtoD(base + offset, bytes.data(), bytes.size()), CUDA_SUCCESS);
    EXPECT_EQ(api().IpcCloseMemHandle(base), CUDA_SUCCESS);
  }

  std::vector<std::byte> Read(const std::string& handle, std::uint64_t offset,
                              std::uint64_t size) const {
    std::vector<std::byte> bytes(size);
    CUdeviceptr base = 0;
    const CUresult opened = api().IpcOpenMemHandle(
        &base, AsHandle(handle), CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    EXPECT_EQ(opened, CUDA_SUCCESS);
    if (opened != CUDA_SUCCESS) return bytes;
    EXPECT_EQ(api().MemcpyDtoH(bytes.data(), base + offset, size), CUDA_SUCCESS);
    EXPECT_EQ(api().IpcCloseMemHandle(base), CUDA_SUCCESS);
    return bytes;
  }

 private:
  explicit Importer(std::shared_ptr<cuda::Driver> driver) : driver_(std::move(driver)) {}
  const cuda::DriverApi& api() const { return driver_->api(); }
  static CUipcMemHandle AsHandle(const std::string& bytes) {
    CUipcMemHandle handle{};
    EXPECT_EQ(bytes.size(), sizeof(handle.reserved));
    bytes.copy(handle.reserved, sizeof(handle.reserved));
    return handle;
  }

  std::shared_ptr<cuda::Driver> driver_;
};

class IpcHandleTest : public ::testing::Test {
 protected:
  // Every process here inherits this one's environment; the fake honours
  // CUDA_VISIBLE_DEVICES as CUDA does.
  IpcHandleTest() { ::unsetenv("CUDA_VISIBLE_DEVICES"); }

  void StartDaemon(std::vector<std::string> args) {
    args.insert(args.begin(),
                {"--backend", "cuda", "--cuda-driver", MEMD_FAKE_CUDA_PATH,
                 "--cuda-handles", "ipc",
                 // Only the trims this test asks for.
                 "--pool-trim-idle-seconds", "86400"});
    auto daemon = DaemonProcess::Start(args);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    admin_ = RawSession::Open(daemon_->socket_dir());
  }

  RawSession Session() { return RawSession::Open(daemon_->socket_dir()); }

  // Creates a device:0 buffer; returns its lease.
  v1::Lease Create(const RawSession& session, const std::string& name,
                   std::uint32_t mode) {
    v1::CreateRequest create;
    create.set_name(name);
    create.set_size_bytes(kSize);
    create.set_location("device:0");
    create.set_mode(mode);
    v1::Lease lease;
    grpc::Status status = session.Call(&v1::Memd::Stub::Create, create, &lease);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(lease.handle().type(), v1::CUDA_IPC);
    EXPECT_EQ(lease.handle().ipc_handle().size(), 64u);
    return lease;
  }

  void Seal(const RawSession& session, const v1::Lease& lease) {
    v1::SealRequest seal;
    seal.set_lease_id(lease.lease_id());
    v1::SealReply sealed;
    ASSERT_TRUE(session.Call(&v1::Memd::Stub::Seal, seal, &sealed).ok());
  }

  void Release(const RawSession& session, const v1::Lease& lease) {
    v1::ReleaseRequest release;
    release.set_lease_id(lease.lease_id());
    v1::ReleaseReply released;
    ASSERT_TRUE(session.Call(&v1::Memd::Stub::Release, release, &released).ok());
  }

  // Hangs up `session`, as a process does when it exits, and waits until
  // the daemon has ended it.
  void End(RawSession& session) {
    const std::uint64_t id = session.id;
    session.socket.reset();
    const bool ended = test::PollUntil([&] {
      v1::ListSessionsReply sessions;
      if (!admin_.Call(&v1::Memd::Stub::ListSessions, v1::ListSessionsRequest(),
                       &sessions).ok()) {
        return false;
      }
      for (const v1::SessionInfo& info : sessions.sessions()) {
        if (info.id() == id) return false;
      }
      return true;
    });
    ASSERT_TRUE(ended) << "session " << id << " did not end";
  }

  // What a trim of device:0 gave back.
  std::uint64_t Trim() {
    v1::TrimRequest request;
    request.set_location("device:0");
    v1::TrimReply reply;
    grpc::Status status = admin_.Call(&v1::Memd::Stub::Trim, request, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply.pools_size() == 1 ? reply.pools(0).released_bytes() : 0;
  }

  std::uint64_t DeviceReserved() {
    v1::StatsReply stats;
    EXPECT_TRUE(admin_.Call(&v1::Memd::Stub::Stats, v1::StatsRequest(), &stats).ok());
    for (const v1::PoolStats& pool : stats.pools()) {
      if (pool.location() == "device:0") return pool.reserved_bytes();
    }
    ADD_FAILURE() << "no device:0 pool";
    return 0;
  }

  std::unique_ptr<DaemonProcess> daemon_;
  RawSession admin_;  // Root: trims, stats, sees every session.
};

TEST_F(IpcHandleTest, TrimKeepsTheSegmentWhileASessionThatReceivedItsHandleLives) {
  StartDaemon({});
  auto importer = Importer::Load();
  ASSERT_NE(importer, nullptr);
  {
    // A producer publishes a buffer others may read, and goes.
    RawSession producer = Session();
    v1::Lease created = Create(producer, "weights", 0644);
    Seal(producer, created);
    Release(producer, created);
    End(producer);
  }
  // A reader opens it, keeps the handle's bytes, releases its lease and
  // stays connected.
  RawSession reader = Session();
  v1::OpenRequest open;
  open.set_name("weights");
  v1::Lease opened;
  ASSERT_TRUE(reader.Call(&v1::Memd::Stub::Open, open, &opened).ok());
  const std::string handle = opened.handle().ipc_handle();
  const std::uint64_t segment_bytes = opened.handle().segment_bytes();
  Release(reader, opened);
  v1::UnlinkRequest unlink;
  unlink.set_name("weights");
  v1::UnlinkReply unlinked;
  ASSERT_TRUE(admin_.Call(&v1::Memd::Stub::Unlink, unlink, &unlinked).ok());
  const std::uint64_t reserved = DeviceReserved();
  ASSERT_GE(reserved, segment_bytes);

  // Nothing is left of the buffer, but the reader may open the handle at
  // any time: the allocation stays, and stays memd's (counted as reserved).
  EXPECT_EQ(Trim(), 0u);
  EXPECT_EQ(DeviceReserved(), reserved);
  EXPECT_EQ(importer->TryOpen(handle), CUDA_SUCCESS);

  // Once the reader is gone, the segment goes back like any idle one, and
  // the handle opens nothing (the driver's allocation is freed).
  End(reader);
  EXPECT_EQ(Trim(), segment_bytes);
  EXPECT_EQ(DeviceReserved(), reserved - segment_bytes);
  EXPECT_EQ(importer->TryOpen(handle), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(IpcHandleTest, ScrubbedReuseNeverHandsAnotherOwnerASegmentWhoseHandleLives) {
  // Idle memory may change domain after a scrub (an operator's choice).
  StartDaemon({"--pool-domain-reuse", "scrub"});
  auto importer = Importer::Load();
  ASSERT_NE(importer, nullptr);
  // Mallory creates a buffer, keeps its handle and lets it go: never
  // sealed, it is removed with its last lease, and its segment is idle.
  RawSession mallory = Session();
  v1::Lease bait = Create(mallory, "bait", 0600);
  Release(mallory, bait);
  // Another domain's buffer (another mode is another domain, as another
  // owner is) needs a segment of that size.
  RawSession victim = Session();
  v1::Lease secret = Create(victim, "secret", 0640);
  EXPECT_NE(secret.handle().segment_id(), bait.handle().segment_id());
  EXPECT_NE(secret.handle().ipc_handle(), bait.handle().ipc_handle());
  std::vector<std::byte> bytes(kSize);
  test::FillPattern(bytes, 42);
  importer->Write(secret.handle().ipc_handle(), secret.handle().offset(), bytes);
  // Mallory's handle reaches none of it.
  std::vector<std::byte> seen =
      importer->Read(bait.handle().ipc_handle(), bait.handle().offset(), kSize);
  EXPECT_FALSE(test::MatchesPattern(seen, 42));
  Release(victim, secret);
}

TEST_F(IpcHandleTest, ALegacySegmentNeverChangesDomainEvenAfterItsSessionsEnd) {
  StartDaemon({"--pool-domain-reuse", "scrub"});
  auto importer = Importer::Load();
  ASSERT_NE(importer, nullptr);
  // The bytes outlive the session that received them: mallory hangs up and
  // keeps them (or passed them to a process that never had a session).
  std::string kept;
  {
    RawSession mallory = Session();
    v1::Lease bait = Create(mallory, "bait", 0600);
    kept = bait.handle().ipc_handle();
    Release(mallory, bait);
    End(mallory);
  }
  RawSession victim = Session();
  v1::Lease secret = Create(victim, "secret", 0640);
  std::vector<std::byte> bytes(kSize);
  test::FillPattern(bytes, 7);
  importer->Write(secret.handle().ipc_handle(), secret.handle().offset(), bytes);
  // The idle segment went back to the driver instead of to the victim: the
  // kept bytes open nothing, and nothing was scrubbed for reuse.
  EXPECT_NE(secret.handle().ipc_handle(), kept);
  EXPECT_EQ(importer->TryOpen(kept), CUDA_ERROR_INVALID_HANDLE);
  v1::StatsReply stats;
  ASSERT_TRUE(admin_.Call(&v1::Memd::Stub::Stats, v1::StatsRequest(), &stats).ok());
  for (const v1::PoolStats& pool : stats.pools()) {
    if (pool.location() == "device:0") {
      EXPECT_EQ(pool.scrubbed_bytes(), 0u);
    }
  }
  Release(victim, secret);
}

}  // namespace
}  // namespace memd
