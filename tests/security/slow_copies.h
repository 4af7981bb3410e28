#pragma once

// A real daemon in this process (test::OpenDaemonTest: the test users can
// reach it) on the project's fake CUDA driver, whose modelled link makes
// every copy to or from device:0 take as long as an attack needs: a copy
// queued behind such a one stays unfinished while the test looks, without
// a clock in the test. Also raw-session steps for the test's own users.

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "memd/v1/memd.grpc.pb.h"
#include "tests/security/open_daemon.h"
#include "tests/support/raw_session.h"

namespace memd::test {

inline constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// 10 MB/s each way: 4 MiB take 0.4 s, 64 MiB 6.7 s.
inline constexpr char kSlowLink[] = "h2d=0.01,d2h=0.01";

class SlowCopyDaemonTest : public OpenDaemonTest {
 protected:
  SlowCopyDaemonTest() {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    config_.backend = "cuda";
    config_.cuda_driver = MEMD_FAKE_CUDA_PATH;
  }
  ~SlowCopyDaemonTest() override { ::unsetenv("MEMD_FAKE_CUDA_LINK_GBPS"); }

  // The fake driver reads its link at cuInit, when the daemon starts.
  void StartSlowDaemon() {
    ::setenv("MEMD_FAKE_CUDA_LINK_GBPS", kSlowLink, 1);
    StartDaemon();
  }

  RawSession Session() const { return RawSession::Open(config_.socket_dir); }

  // Creates NAME (its descriptor read and dropped, unless kept for Write);
  // returns the lease, or fails the test.
  static v1::Lease Create(const RawSession& session, const std::string& name,
                          std::uint64_t size, const std::string& location = "host",
                          std::uint32_t mode = 0600, bool keep_descriptor = false) {
    v1::CreateRequest create;
    create.set_name(name);
    create.set_size_bytes(size);
    create.set_location(location);
    create.set_mode(mode);
    v1::Lease lease;
    grpc::Status status = session.Call(&v1::Memd::Stub::Create, create, &lease);
    if (!keep_descriptor) session.Drain();
    EXPECT_TRUE(status.ok()) << name << ": " << status.error_message();
    return lease;
  }

  // Queues a copy of `length` bytes; returns its transfer id, or fails the
  // test.
  static std::uint64_t Copy(const RawSession& session, std::uint64_t from, std::uint64_t to,
                            std::uint64_t length, std::uint64_t to_offset = 0) {
    v1::CopyRequest copy;
    copy.mutable_source()->set_lease_id(from);
    copy.mutable_source()->set_length(length);
    copy.mutable_destination()->set_lease_id(to);
    copy.mutable_destination()->set_offset(to_offset);
    copy.mutable_destination()->set_length(length);
    v1::CopyReply reply;
    grpc::Status status = session.Call(&v1::Memd::Stub::Copy, copy, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply.transfer_id();
  }

  static grpc::Status Seal(const RawSession& session, std::uint64_t lease) {
    v1::SealRequest seal;
    seal.set_lease_id(lease);
    v1::SealReply reply;
    return session.Call(&v1::Memd::Stub::Seal, seal, &reply);
  }

  // The first `length` bytes of host buffer NAME, through a read lease of
  // `session` (released again); empty when it cannot be read.
  static std::string Read(const RawSession& session, const std::string& name,
                          std::size_t length) {
    v1::OpenRequest open;
    open.set_name(name);
    open.set_access(v1::READ);
    v1::Lease lease;
    grpc::Status status = session.Call(&v1::Memd::Stub::Open, open, &lease);
    EXPECT_TRUE(status.ok()) << name << ": " << status.error_message();
    if (!status.ok()) return "";
    std::string bytes(length, '\0');
    auto fd = session.TakeFd(lease.handle().fd_seq());
    EXPECT_TRUE(fd.ok()) << fd.status();
    if (!fd.ok() || ::pread(fd->get(), bytes.data(), length,
                            static_cast<off_t>(lease.handle().offset())) !=
                        static_cast<ssize_t>(length)) {
      bytes.clear();
    }
    v1::ReleaseRequest release;
    release.set_lease_id(lease.lease_id());
    v1::ReleaseReply released;
    EXPECT_TRUE(session.Call(&v1::Memd::Stub::Release, release, &released).ok());
    return bytes;
  }

  // Writes `bytes` at the start of host buffer memory that `lease` (just
  // granted to `session`, its descriptor not taken yet) maps.
  static bool Write(const RawSession& session, const v1::Lease& lease,
                    const std::string& bytes) {
    auto fd = session.TakeFd(lease.handle().fd_seq());
    return fd.ok() && ::pwrite(fd->get(), bytes.data(), bytes.size(),
                               static_cast<off_t>(lease.handle().offset())) ==
                          static_cast<ssize_t>(bytes.size());
  }

  static v1::StatsReply Stats(const RawSession& session) {
    v1::StatsReply stats;
    grpc::Status status = session.Call(&v1::Memd::Stub::Stats, v1::StatsRequest(), &stats);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return stats;
  }
};

}  // namespace memd::test
