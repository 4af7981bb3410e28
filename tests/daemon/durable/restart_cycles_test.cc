// Buffers outlive memd, a hundred times over (issue 23): memd runs under the
// stand-in for systemd (tests/support/service_manager.h) and is killed with
// SIGKILL 100 times while client processes (memd-test-client) create,
// write, seal, open, copy and hold buffers, and are themselves killed at
// random points. The points are drawn from a seeded std::mt19937 (the seed
// is printed; MEMD_CYCLES_SEED replays one) and defined by events, not by
// time: memd dies before, while or after the clients run. After every
// restart each sealed persistent buffer is checked: its listing (id, size,
// owner, mode, attrs, times...) as first seen, its bytes byte for byte.
// After the last one and the grace period nothing is left over: not in the
// descriptor store, not in the pools, not in memd's own descriptors.
// Once on the host backend, once on the fake CUDA driver (device buffers).

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cuda/driver.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/client/pattern.h"
#include "tests/daemon/durable/buffer_steps.h"
#include "tests/support/poll_until.h"
#include "tests/support/run_program.h"
#include "tests/support/service_manager.h"
#include "tests/support/temp_dir.h"

extern char** environ;

namespace memd {
namespace {

constexpr int kCycles = 100;
constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;
// Sealed buffers kept at once; beyond, the test unlinks some.
constexpr std::size_t kMaxKept = 14;

// What a listing says of a buffer, less what changes with every daemon
// (lease counts).
std::string Describe(const BufferInfo& b) {
  std::string attrs;
  for (const auto& [key, value] : b.attrs) absl::StrAppend(&attrs, key, "=", value, ",");
  return absl::StrCat(b.name, " id ", b.id, " size ", b.size, " at ", b.location, " uid ",
                      b.owner_uid, " gid ", b.owner_gid, " mode ", b.mode, " state ",
                      static_cast<int>(b.state), " persistence ",
                      static_cast<int>(b.persistence), " unlinked ", b.unlinked, " created ",
                      absl::FormatTime(b.created), " sealed ",
                      b.sealed ? absl::FormatTime(*b.sealed) : "no", " pid ", b.creator_pid,
                      " ", attrs);
}

// memd-test-client running in the background, its stdout on a pipe.
class ClientProcess {
 public:
  ClientProcess(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return;
    out_ = out[0];
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    const std::string program = test::BinDir() + "/memd-test-client";
    std::vector<std::string> argv_text = {program};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv, envp;
    for (const std::string& arg : argv_text) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    for (const std::string& entry : env) envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);
    if (::posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), envp.data()) !=
        0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
  }
  ~ClientProcess() {
    Kill();
    if (out_ >= 0) ::close(out_);
  }
  ClientProcess(const ClientProcess&) = delete;
  ClientProcess& operator=(const ClientProcess&) = delete;

  bool started() const { return pid_ > 0; }

  // Reads its output up to the first line or its end; the line (empty at
  // the end). A guard, not an expectation, stops a client that hangs.
  std::string ReadLine() {
    while (!absl::StrContains(output_, "\n")) {
      pollfd ready{out_, POLLIN, 0};
      if (::poll(&ready, 1, 30000) != 1) break;
      char chunk[256];
      const ssize_t got = ::read(out_, chunk, sizeof(chunk));
      if (got <= 0) break;
      output_.append(chunk, got);
    }
    return output_.substr(0, output_.find('\n'));
  }

  void Kill() {
    if (pid_ <= 0 || exit_code_.has_value()) return;
    ::kill(pid_, SIGKILL);
    Reap();
  }

  // Its exit code; -1 when a signal ended it.
  int Reap() {
    if (exit_code_.has_value()) return *exit_code_;
    int status = 0;
    if (::waitpid(pid_, &status, 0) != pid_) return -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return *exit_code_;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string output_;
  std::optional<int> exit_code_;
};

class RestartCyclesTest : public ::testing::Test {
 protected:
  // A sealed persistent buffer the test knows: what it must hold, and its
  // listing as first seen after it sealed.
  struct Kept {
    std::uint64_t size = 0;
    std::uint32_t seed = 0;
    std::string location;
    std::string described;  // Empty until first listed sealed.
  };
  // What a client run means if it succeeds.
  struct Run {
    std::unique_ptr<ClientProcess> process;
    std::string name;  // A buffer it seals, empty for readers and holders.
    Kept kept;
    bool consumer = false;  // Exit 4 is a mismatch: a buffer's bytes changed.
    bool holder = false;    // Prints "held", then waits to be killed.
  };

  RestartCyclesTest() { ::unsetenv("CUDA_VISIBLE_DEVICES"); }

  void SetUp() override {
    auto manager = test::ServiceManager::Create({.fd_store_max = 4096});
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = std::move(*manager);
    seed_ = static_cast<std::uint32_t>(std::random_device{}());
    if (const char* replay = std::getenv("MEMD_CYCLES_SEED"); replay != nullptr) {
      ASSERT_TRUE(absl::SimpleAtoi(replay, &seed_)) << replay;
    }
    std::printf("restart cycles seed %u (MEMD_CYCLES_SEED=%u replays it)\n", seed_, seed_);
    std::fflush(stdout);
    RecordProperty("seed", std::to_string(seed_));
    random_.seed(seed_);
    for (char** entry = environ; *entry != nullptr; ++entry) {
      if (!absl::StartsWith(*entry, "MEMD_SOCKET_DIR=")) client_env_.push_back(*entry);
    }
    client_env_.push_back(absl::StrCat("MEMD_SOCKET_DIR=", dir_.path()));
  }

  void UseFakeCuda() {
    cuda_ = true;
    ::setenv("MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH, 1);
    client_env_.push_back(absl::StrCat("MEMD_CUDA_DRIVER=", MEMD_FAKE_CUDA_PATH));
    auto driver = cuda::Driver::Load(MEMD_FAKE_CUDA_PATH);
    ASSERT_TRUE(driver.ok()) << driver.status();
    driver_ = *std::move(driver);
  }

  void StartMemd() {
    std::vector<std::string> args = {"--socket-dir", dir_.path(), "--metrics-address", "",
                                     "--recovery-grace-seconds", "1"};
    if (cuda_) {
      args.insert(args.end(), {"--backend", "cuda", "--cuda-driver", MEMD_FAKE_CUDA_PATH});
    } else {
      args.insert(args.end(), {"--backend", "host"});
    }
    ASSERT_TRUE(manager_->Start(test::BinDir() + "/memd", args).ok());
    absl::Status ready = manager_->WaitReady();
    ASSERT_TRUE(ready.ok()) << ready;
  }

  void KillMemd() { test::KillWithSigkill(*manager_); }

  std::unique_ptr<Client> Connect() {
    ConnectOptions options;
    options.mapping_cache_bytes = 0;
    return test::ConnectOrFail(dir_.path(), options);
  }

  // Whether `buffer`'s bytes are Pattern(seed), through the driver for a
  // device buffer.
  bool HoldsPattern(Client& client, const Buffer& buffer, std::uint32_t seed) {
    if (!absl::StartsWith(buffer.info().location, "device:")) {
      return test::MatchesPattern(buffer.data(), seed);
    }
    std::vector<std::byte> bytes(buffer.size());
    const cuda::DriverApi& api = driver_->api();
    if (!driver_->Check(api.MemcpyDtoH(bytes.data(), buffer.device_pointer(), bytes.size()),
                        "cuMemcpyDtoH")
             .ok()) {
      return false;
    }
    return test::MatchesPattern(bytes, seed);
  }

  // Makes device `location`'s primary context current on this thread.
  void UseDevice(Client& client, const std::string& location) {
    auto ordinal = client.CudaDevice(location);
    ASSERT_TRUE(ordinal.ok()) << ordinal.status();
    const cuda::DriverApi& api = driver_->api();
    CUcontext context;
    ASSERT_TRUE(driver_->Check(api.DevicePrimaryCtxRetain(&context, *ordinal), "retain").ok());
    ASSERT_TRUE(driver_->Check(api.CtxSetCurrent(context), "set current").ok());
  }

  // After a restart: every kept buffer is listed as it was and holds its
  // bytes; buffers sealed by clients killed before they said so are taken
  // in; nothing is listed that no client made.
  void CheckAfterRestart(Client& client) {
    auto listed = client.List();
    ASSERT_TRUE(listed.ok()) << listed.status();
    std::map<std::string, BufferInfo> by_name;
    for (const BufferInfo& info : *listed) by_name.emplace(info.name, info);
    for (const auto& [name, info] : by_name) {
      const bool sealed_persistent = info.state == BufferState::kSealed &&
                                     info.persistence == Persistence::kPersistent;
      if (kept_.contains(name) || !sealed_persistent) continue;
      // Sealed by a client killed before it printed OK (or made here).
      auto expected = maybe_.find(name);
      ASSERT_NE(expected, maybe_.end()) << "memd lists a buffer no client sealed: "
                                        << Describe(info);
      kept_.emplace(name, expected->second);
    }
    for (auto& [name, kept] : kept_) {
      SCOPED_TRACE(name);
      auto found = by_name.find(name);
      ASSERT_NE(found, by_name.end()) << "a sealed persistent buffer is lost";
      const std::string described = Describe(found->second);
      if (kept.described.empty()) {
        kept.described = described;
        EXPECT_EQ(found->second.size, kept.size);
        EXPECT_EQ(found->second.location, kept.location);
      } else {
        EXPECT_EQ(described, kept.described) << "its listing changed across a restart";
      }
      if (absl::StartsWith(kept.location, "device:")) UseDevice(client, kept.location);
      auto buffer = client.Open(name);
      ASSERT_TRUE(buffer.ok()) << buffer.status();
      EXPECT_TRUE(HoldsPattern(client, *buffer, kept.seed)) << "its bytes changed";
    }
    // Every other name is one a client made and did not seal (or an
    // ephemeral one a holder made): adopted, waiting for its grace period.
    for (const auto& [name, info] : by_name) {
      if (kept_.contains(name)) continue;
      const bool known = maybe_.contains(name) || absl::EndsWith(name, ".mine") ||
                         absl::StartsWith(name, "h");
      EXPECT_TRUE(known) << "memd lists a buffer no client made: " << Describe(info);
      EXPECT_FALSE(info.state == BufferState::kSealed &&
                   info.persistence == Persistence::kPersistent)
          << Describe(info);
    }
  }

  // memd's open descriptors less those of what it stored: what it holds
  // beyond its memory (sockets, epoll, threads...), which must not grow
  // with the cycles.
  long OwnDescriptors(const Client& /*client*/) {
    const pid_t pid = manager_->Current().main_pid;
    DIR* dir = ::opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
    if (dir == nullptr) return -1;
    long count = 0;
    while (const dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] != '.') ++count;
    }
    ::closedir(dir);
    // Measured: three per stored descriptor (on both backends), whatever
    // the cycle: the two the segment holds, and memd's own copy of what it
    // stores, which an upgrade by exec hands on (durable::MirrorStore).
    return count - 3 * static_cast<long>(manager_->Current().stored_names.size());
  }

  std::string Pick(const std::vector<std::string>& names) {
    return names[std::uniform_int_distribution<std::size_t>(0, names.size() - 1)(random_)];
  }

  // One client with a randomly drawn command.
  Run Launch(int cycle, int k) {
    Run run;
    std::vector<std::string> kept_names;
    for (const auto& [name, kept] : kept_) kept_names.push_back(name);
    const std::uint32_t seed = static_cast<std::uint32_t>(cycle * 16 + k + 1);
    const std::string suffix = absl::StrCat(cycle, "_", k);
    int choice = std::uniform_int_distribution<int>(0, 9)(random_);
    if (kept_names.empty()) choice = choice % 3;  // Only makers.
    std::vector<std::string> args;
    if (choice <= 1) {  // A host buffer: create, write, seal.
      run.name = "p" + suffix;
      run.kept = {.size = RandomSize(), .seed = seed, .location = "host", .described = ""};
      args = {"produce", run.name, std::to_string(run.kept.size), std::to_string(seed)};
      if (std::bernoulli_distribution(0.3)(random_)) args.push_back("640");
    } else if (choice == 2) {  // A device buffer where there is one.
      if (cuda_) {
        run.name = "d" + suffix;
        run.kept = {.size = RandomSize() + kMiB, .seed = seed, .location = "device:0", .described = ""};
        args = {"device-produce", run.name, std::to_string(run.kept.size),
                std::to_string(seed), "0"};
      } else {
        run.holder = true;
        args = {"create-hold", "h" + suffix, std::to_string(RandomSize())};
      }
    } else if (choice <= 4) {  // A copy in the daemon, then a seal.
      const std::string source = Pick(kept_names);
      run.name = "c" + suffix;
      run.kept = kept_.at(source);
      run.kept.described.clear();
      args = {"copy", source, run.name};
    } else if (choice <= 6) {  // A reader.
      const std::string source = Pick(kept_names);
      const Kept& kept = kept_.at(source);
      run.consumer = true;
      const bool device = absl::StartsWith(kept.location, "device:");
      args = {device ? "device-consume" : "consume", source, std::to_string(kept.size),
              std::to_string(kept.seed)};
    } else if (choice == 7) {  // A holder of a kept buffer and an ephemeral one.
      run.holder = true;
      const std::string source = Pick(kept_names);
      const bool device = absl::StartsWith(kept_.at(source).location, "device:");
      args = {device ? "device-hold" : "hold", source};
    } else {  // A creator that dies before its seal.
      run.holder = true;
      if (cuda_ && std::bernoulli_distribution(0.5)(random_)) {
        args = {"device-create-hold", "h" + suffix, std::to_string(RandomSize() + kMiB)};
      } else {
        args = {"create-hold", "h" + suffix, std::to_string(RandomSize())};
      }
    }
    if (!run.name.empty()) maybe_.emplace(run.name, run.kept);
    run.process = std::make_unique<ClientProcess>(args, client_env_);
    EXPECT_TRUE(run.process->started());
    return run;
  }

  std::uint64_t RandomSize() {
    // Size classes mostly, now and then a large buffer.
    if (std::bernoulli_distribution(0.15)(random_)) {
      return std::uniform_int_distribution<std::uint64_t>(kMiB, 3 * kMiB)(random_);
    }
    return std::uniform_int_distribution<std::uint64_t>(1, 200 * kKiB)(random_);
  }

  // One cycle's clients, and memd's death at a random point among them.
  void RunClientsAndKill(int cycle) {
    std::vector<Run> runs;
    const int count = std::uniform_int_distribution<int>(1, 4)(random_);
    // 0: memd dies while they start; 1: after the first has got somewhere;
    // 2: after all have finished (or hold).
    const int when = std::uniform_int_distribution<int>(0, 2)(random_);
    for (int k = 0; k < count; ++k) {
      runs.push_back(Launch(cycle, k));
      // Some die on their own schedule: at once, or once they got going.
      if (std::bernoulli_distribution(0.15)(random_)) runs.back().process->Kill();
    }
    auto settle = [&](Run& run) {
      const std::string line = run.process->ReadLine();
      if (run.holder) {
        // Held: dies now or with memd.
        if (line == "held" && std::bernoulli_distribution(0.3)(random_)) run.process->Kill();
        return;
      }
      const int code = run.process->Reap();
      if (run.consumer) {
        EXPECT_NE(code, 4) << "a reader saw other bytes (cycle " << cycle << ")";
      }
      if (code == 0 && !run.name.empty()) kept_.emplace(run.name, run.kept);
    };
    if (when >= 1) {
      for (std::size_t i = 0; i < (when == 1 ? 1 : runs.size()); ++i) settle(runs[i]);
    }
    KillMemd();
    for (Run& run : runs) run.process->Kill();
  }

  // Unlinks buffers at random beyond kMaxKept; now and then publishes one
  // from here with attributes, a mode and pinned memory.
  void Tend(Client& client, int cycle) {
    while (kept_.size() > kMaxKept) {
      std::vector<std::string> names;
      for (const auto& [name, kept] : kept_) names.push_back(name);
      const std::string name = Pick(names);
      ASSERT_TRUE(client.Unlink(name).ok()) << name;
      kept_.erase(name);
    }
    if (cycle % 10 == 3) {
      const std::string name = absl::StrCat("a", cycle);
      Kept kept{.size = RandomSize(), .seed = static_cast<std::uint32_t>(cycle * 16 + 15),
                .location = cycle % 20 == 3 ? "pinned" : "host", .described = ""};
      auto buffer = client.Create(
          name, kept.size,
          {.location = kept.location, .mode = 0604,
           .attrs = {{"dtype", "float16"}, {"cycle", std::to_string(cycle)}}});
      ASSERT_TRUE(buffer.ok()) << buffer.status();
      test::FillPattern(buffer->mutable_data(), kept.seed);
      ASSERT_TRUE(buffer->Seal().ok());
      maybe_.emplace(name, kept);
      kept_.emplace(name, kept);
    }
  }

  // The grace period over, only the kept buffers are left (unsealed and
  // ephemeral ones of dead holders went), and only this test's session.
  // Over as memd says: a kept buffer that a dead client held waits for it
  // until then, and unlinked meanwhile it would go only at the end.
  void AwaitGraceEnd(Client& client) {
    ASSERT_TRUE(test::PollUntil([&] {
      auto stats = client.Stats();
      return stats.ok() && !stats->durability.in_grace && stats->buffers == kept_.size() &&
             stats->sessions == 1;
    })) << "unsealed, ephemeral buffers or sessions outlive their holders";
    auto listed = client.List();
    ASSERT_TRUE(listed.ok());
    EXPECT_EQ(listed->size(), kept_.size());
    for (const BufferInfo& info : *listed) EXPECT_TRUE(kept_.contains(info.name)) << info.name;
  }

  void RunCycles() {
    StartMemd();
    std::optional<long> first_descriptors;
    for (int cycle = 0; cycle < kCycles; ++cycle) {
      SCOPED_TRACE(absl::StrCat("cycle ", cycle, ", seed ", seed_));
      {
        auto client = Connect();
        ASSERT_NE(client, nullptr);
        ASSERT_NO_FATAL_FAILURE(CheckAfterRestart(*client));
        ASSERT_NO_FATAL_FAILURE(Tend(*client, cycle));
        const long descriptors = OwnDescriptors(*client);
        if (!first_descriptors.has_value()) first_descriptors = descriptors;
        EXPECT_LE(descriptors, *first_descriptors + 4)
            << "memd holds more descriptors with every restart";
        if (cycle % 25 == 24) {
          ASSERT_NO_FATAL_FAILURE(AwaitGraceEnd(*client));
        }
      }
      ASSERT_NO_FATAL_FAILURE(RunClientsAndKill(cycle));
      if (::testing::Test::HasFailure()) return;
      StartMemd();
    }
    SCOPED_TRACE(absl::StrCat("after the last cycle, seed ", seed_));
    auto client = Connect();
    ASSERT_NE(client, nullptr);
    ASSERT_NO_FATAL_FAILURE(CheckAfterRestart(*client));

    ASSERT_NO_FATAL_FAILURE(AwaitGraceEnd(*client));

    // The store holds one descriptor per segment and one state file; the
    // pools hold the kept buffers' bytes and no more.
    auto stats = client->Stats();
    ASSERT_TRUE(stats.ok());
    std::uint64_t segments = 0, used = 0;
    for (const PoolStats& pool : stats->pools) {
      segments += pool.segments;
      used += pool.used_bytes;
    }
    std::vector<std::string> stored = manager_->Current().stored_names;
    std::set<std::string> distinct(stored.begin(), stored.end());
    EXPECT_EQ(distinct.size(), stored.size()) << "a name is stored twice";
    std::size_t states = 0, segment_fds = 0;
    for (const std::string& name : stored) {
      if (absl::StartsWith(name, "memd.state.")) ++states;
      if (absl::StartsWith(name, "memd.segment.")) ++segment_fds;
    }
    EXPECT_EQ(states, 1u);
    EXPECT_EQ(segment_fds, segments);
    EXPECT_EQ(stored.size(), segments + 1);
    auto usage = client->Usage();
    ASSERT_TRUE(usage.ok());
    std::uint64_t charged = 0;
    for (const UidUsage& u : *usage) charged += u.bytes;
    EXPECT_EQ(used, charged) << "pool bytes in use are no live buffer's";

    // Everything unlinked and trimmed: nothing reserved, nothing stored
    // but the state.
    for (const auto& [name, kept] : kept_) EXPECT_TRUE(client->Unlink(name).ok()) << name;
    // Trimmed until empty: a buffer may go a moment after its Unlink. One
    // way is known and waited out above: a buffer a killed reader held
    // waits for it until the grace period ends, also once unlinked
    // (RecoveryStatsTest shows it). Under the sanitizers, seed 3197486226
    // kept a segment after one Trim in 3 of 6 concurrent replays at 1db348c
    // and in none of 6 at 43c74ed (one Trim, without that wait), so whether
    // that was the grace is not known. A buffer that never goes still fails
    // below, after the guard; one that goes late is said in the log.
    int trims = 0;
    test::PollUntil([&] {
      ++trims;
      if (!client->Trim().ok()) return false;
      auto now = client->Stats();
      if (!now.ok()) return false;
      for (const PoolStats& pool : now->pools) {
        if (pool.segments != 0) return false;
      }
      return true;
    });
    if (trims > 1) {
      std::fprintf(stderr, "restart cycles: the pools were empty only after %d trims\n", trims);
    }
    stats = client->Stats();
    ASSERT_TRUE(stats.ok());
    for (const PoolStats& pool : stats->pools) {
      EXPECT_EQ(pool.reserved_bytes, 0u) << pool.location;
      EXPECT_EQ(pool.segments, 0u) << pool.location;
    }
    EXPECT_TRUE(manager_->WaitFor([](const test::ServiceManager::Snapshot& now) {
      return now.stored_names.size() == 1 &&
             absl::StartsWith(now.stored_names[0], "memd.state.");
    })) << "the store keeps descriptors of segments given back";
    EXPECT_EQ(manager_->Current().dropped_over_max, 0u);
  }

  test::TempDir dir_;
  std::unique_ptr<test::ServiceManager> manager_;
  bool cuda_ = false;
  std::shared_ptr<const cuda::Driver> driver_;
  std::uint32_t seed_ = 0;
  std::mt19937 random_;
  std::vector<std::string> client_env_;
  std::map<std::string, Kept> kept_;   // Sealed: must be there after each restart.
  std::map<std::string, Kept> maybe_;  // Every buffer a client may have sealed.
};

TEST_F(RestartCyclesTest, AHundredKillsOnTheHostBackendLoseNothingAndLeakNothing) {
  RunCycles();
}

TEST_F(RestartCyclesTest, AHundredKillsOnTheFakeCudaDriverLoseNothingAndLeakNothing) {
  ASSERT_NO_FATAL_FAILURE(UseFakeCuda());
  RunCycles();
}

}  // namespace
}  // namespace memd
