#pragma once

// The fixture of broker_test.cc and the files beside it: a Broker over a
// host pool (and a device:0 pool when asked) on the fake backend and a fake
// clock, with users and groups to tell apart and helpers that publish, write
// and read buffers.

#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>

#include "gtest/gtest.h"
#include "daemon/pool/carving_pool.h"
#include "tests/daemon/fake_backend.h"
#include "tests/daemon/peer.h"
#include "tests/support/fake_clock.h"
#include "daemon/broker/broker.h"

namespace memd::broker {

inline constexpr std::uint64_t kMiB = 1 << 20;
inline constexpr uid_t kAlice = 1000;
inline constexpr uid_t kBob = 1001;
inline constexpr gid_t kStaff = 50;
inline constexpr gid_t kOther = 60;

inline CreateParams Params(std::string name, std::uint64_t size = kMiB,
                    std::uint32_t mode = kDefaultMode,
                    Persistence persistence = Persistence::kPersistent) {
  return CreateParams{std::move(name), size, Location::Host(), mode, persistence};
}

class BrokerTest : public ::testing::Test {
 protected:
  BrokerTest() { MakeBroker(BrokerLimits{}); }

  // `device`: a device:0 pool beside host.
  void MakeBroker(BrokerLimits limits, bool device = false) {
    broker_.reset();
    pools_ = std::make_unique<pool::PoolSet>();
    pool::CarvingPoolOptions options;
    options.limit_bytes = 256 * kMiB;
    options.idle_budget = -1;  // Reuse shows in hit counts; keep idle memory.
    pools_->Add(std::make_unique<pool::CarvingPool>(backend_, Location::Host(),
                                                    options, clock_));
    if (device) {
      pools_->Add(std::make_unique<pool::CarvingPool>(backend_, Location::Device(0),
                                                      options, clock_));
    }
    broker_ = std::make_unique<Broker>(*pools_, limits, clock_);
  }

  SessionId Start(PeerCredentials peer) {
    auto session = broker_->StartSession(peer, "test");
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  }

  // Creates, writes `text` and seals.
  Grant Publish(SessionId session, const std::string& name,
                const std::string& text, std::uint32_t mode = kDefaultMode) {
    auto grant = broker_->Create(session, Params(name, text.size(), mode));
    EXPECT_TRUE(grant.ok()) << grant.status();
    Write(*grant, text);
    EXPECT_TRUE(broker_->Seal(session, grant->lease).ok());
    return std::move(*grant);
  }

  static void Write(const Grant& grant, const std::string& text) {
    void* map = ::mmap(nullptr, grant.mapped_bytes, PROT_READ | PROT_WRITE,
                       MAP_SHARED, grant.handle.fd, grant.offset);
    ASSERT_NE(map, MAP_FAILED);
    std::memcpy(map, text.data(), text.size());
    ::munmap(map, grant.mapped_bytes);
  }

  static std::string Read(const Grant& grant, std::size_t size) {
    void* map = ::mmap(nullptr, grant.mapped_bytes, PROT_READ, MAP_SHARED,
                       grant.handle.fd, grant.offset);
    EXPECT_NE(map, MAP_FAILED);
    std::string text(static_cast<const char*>(map), size);
    ::munmap(map, grant.mapped_bytes);
    return text;
  }

  test::FakeClock clock_;
  test::FakeBackend backend_;
  std::unique_ptr<pool::PoolSet> pools_;
  std::unique_ptr<Broker> broker_;
};

}  // namespace memd::broker
