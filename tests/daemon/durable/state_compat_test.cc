// A state an earlier build wrote is adopted by every later build (issue 23).
//
// Building an older commit in CI costs a full build, so the earlier build is
// frozen instead: data/state_v1.bin holds the exact bytes of a `memd.state.<N>`
// memfd a memd wrote (format version 1) while holding the buffers that
// data/state_v1.json lists, with each segment (memd.segment.<id>: location,
// bytes) and each buffer (what a listing said of it, where its bytes sit, the
// seed of its pattern). The test recreates the segments as the host backend
// makes them (daemon/backend/host/memfd_segment.cc), with each buffer's
// pattern at its offset, puts them and the golden state into a stand-in for
// systemd's descriptor store (test::ServiceManager::Preload), starts the
// current memd and checks it takes everything back as recorded. A change to
// the state format must keep reading version 1, or this fails.
//
// The golden files are written by this file too, by a build that means to
// freeze its format (only then: the point is that they do not follow the
// code):
//   MEMD_REGENERATE_GOLDEN=1 build/bin/state_compat_test
//       --gtest_filter=StateCompatTest.RegenerateGolden   (one line)
// It runs memd under test::ServiceManager, creates the buffers below with
// their patterns, kills memd with SIGKILL and dumps the stored state memfd
// (trailing zeros of its sparse capacity cut) and the manifest.

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "daemon/durable/state.h"
#include "daemon/durable/state_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "nlohmann/json.hpp"
#include "tests/client/pattern.h"
#include "tests/daemon/durable/buffer_steps.h"
#include "tests/support/poll_until.h"
#include "tests/support/run_program.h"
#include "tests/support/service_manager.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using test::Describe;

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;
using Json = nlohmann::json;

constexpr char kManifestFile[] = "state_v1.json";
constexpr char kStateFile[] = "state_v1.bin";
// Where the format version sits in the state file's header (state_file.h).
constexpr std::size_t kVersionAt = 8;
// The seals the host backend puts on a segment's memfd (MemfdSegment::kSeals).
constexpr int kSegmentSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

std::string GoldenPath(const std::string& file) {
  return absl::StrCat(MEMD_GOLDEN_DIR, "/", file);
}

struct GoldenSegment {
  std::uint64_t id = 0;
  std::string name;  // memd.segment.<id>
  std::string location;
  std::uint64_t bytes = 0;
};

struct GoldenBuffer {
  BufferInfo info;  // As the writing memd listed it (lease_count aside).
  std::uint32_t seed = 0;
  std::uint64_t segment = 0;
  std::uint64_t offset = 0;
  // Unsealed or ephemeral: lived on leases that died with the writer.
  bool goes_after_grace = false;
};

struct Golden {
  std::string state_name;  // memd.state.<epoch>
  std::uint64_t state_stored_bytes = 0;  // The memfd's size as stored.
  std::string state_bytes;               // Its bytes up to the last frame.
  std::uint64_t generation = 0;
  std::vector<GoldenSegment> segments;
  std::vector<GoldenBuffer> buffers;
};

std::string StateName(BufferState state) {
  return state == BufferState::kSealed ? "sealed" : "creating";
}
std::string PersistenceName(Persistence persistence) {
  return persistence == Persistence::kEphemeral ? "ephemeral" : "persistent";
}

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

absl::StatusOr<Golden> ReadGolden() {
  absl::StatusOr<std::string> text = ReadWhole(GoldenPath(kManifestFile));
  if (!text.ok()) return text.status();
  const Json manifest = Json::parse(*text);
  Golden golden;
  const Json& state = manifest.at("state");
  golden.state_name = state.at("name");
  golden.state_stored_bytes = state.at("stored_bytes");
  golden.generation = state.at("generation");
  absl::StatusOr<std::string> bytes = ReadWhole(GoldenPath(state.at("file")));
  if (!bytes.ok()) return bytes.status();
  golden.state_bytes = *std::move(bytes);
  if (golden.state_bytes.size() != state.at("file_bytes").get<std::uint64_t>()) {
    return absl::DataLossError(absl::StrCat(kStateFile, " is not the size the manifest says"));
  }
  for (const Json& s : manifest.at("segments")) {
    golden.segments.push_back({s.at("id"), s.at("name"), s.at("location"), s.at("bytes")});
  }
  for (const Json& b : manifest.at("buffers")) {
    GoldenBuffer buffer;
    BufferInfo& info = buffer.info;
    info.name = b.at("name");
    info.id = b.at("id");
    info.size = b.at("size");
    info.location = b.at("location");
    info.owner_uid = b.at("owner_uid");
    info.owner_gid = b.at("owner_gid");
    const std::string mode = b.at("mode");
    char* end = nullptr;
    info.mode = static_cast<std::uint32_t>(std::strtoul(mode.c_str(), &end, 8));
    if (mode.empty() || *end != '\0') {
      return absl::DataLossError(absl::StrCat(info.name, ": mode ", mode, " is not octal"));
    }
    info.state = b.at("state") == "sealed" ? BufferState::kSealed : BufferState::kCreating;
    info.persistence =
        b.at("persistence") == "ephemeral" ? Persistence::kEphemeral : Persistence::kPersistent;
    info.created = absl::FromUnixNanos(b.at("created_unix_ns").get<std::int64_t>());
    if (const std::int64_t sealed = b.at("sealed_unix_ns"); sealed != 0) {
      info.sealed = absl::FromUnixNanos(sealed);
    }
    info.creator_pid = b.at("creator_pid");
    info.attrs = b.at("attrs").get<std::map<std::string, std::string>>();
    buffer.seed = b.at("seed");
    buffer.segment = b.at("segment");
    buffer.offset = b.at("offset");
    buffer.goes_after_grace = b.at("goes_after_grace");
    golden.buffers.push_back(std::move(buffer));
  }
  return golden;
}

// A segment's memfd as the host backend leaves it (MemfdSegment::Create:
// the name, MFD_CLOEXEC | MFD_ALLOW_SEALING, every page committed, sealed
// against resizing), then written as clients wrote its buffers.
absl::StatusOr<UniqueFd> MakeSegment(const GoldenSegment& segment,
                                     const std::vector<GoldenBuffer>& buffers) {
  const char* name = segment.location == "pinned" ? "memd:pinned" : "memd:host";
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return absl::InternalError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  if (::fallocate(fd.get(), 0, 0, static_cast<off_t>(segment.bytes)) != 0) {
    return absl::InternalError(absl::StrCat("fallocate: ", std::strerror(errno)));
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, kSegmentSeals) != 0) {
    return absl::InternalError(absl::StrCat("F_ADD_SEALS: ", std::strerror(errno)));
  }
  for (const GoldenBuffer& buffer : buffers) {
    if (buffer.segment != segment.id) continue;
    std::vector<std::byte> bytes(buffer.info.size);
    test::FillPattern(bytes, buffer.seed);
    if (::pwrite(fd.get(), bytes.data(), bytes.size(), static_cast<off_t>(buffer.offset)) !=
        static_cast<ssize_t>(bytes.size())) {
      return absl::InternalError(absl::StrCat("pwrite ", buffer.info.name));
    }
  }
  return fd;
}

// The state memfd as memd stores it: sparse to its capacity, its frames
// at the start.
absl::StatusOr<UniqueFd> MakeState(const Golden& golden, const std::string& bytes) {
  UniqueFd fd(::memfd_create(golden.state_name.c_str(), MFD_CLOEXEC));
  if (!fd) return absl::InternalError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  if (::ftruncate(fd.get(), static_cast<off_t>(golden.state_stored_bytes)) != 0 ||
      ::pwrite(fd.get(), bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    return absl::InternalError(absl::StrCat("writing the state: ", std::strerror(errno)));
  }
  return fd;
}

class StateCompatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The golden buffers are root's (uid 0, as the tests run here and in
    // CI); another uid could neither see the private ones nor adopt them.
    if (::geteuid() != 0) GTEST_SKIP() << "the golden state's buffers belong to root";
    auto manager = test::ServiceManager::Create({.fd_store_max = 4096});
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = std::move(*manager);
  }

  // Starts memd on the host backend under the manager, its log (stderr) in
  // log_path(): through sh, which execs memd, so the main pid is memd's.
  void StartMemd(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"-c", "exec \"$0\" \"$@\" 2>>\"$MEMD_COMPAT_LOG\"",
                                     test::BinDir() + "/memd", "--socket-dir", dir_.path(),
                                     "--backend", "host", "--metrics-address", ""};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(manager_->Start("/bin/sh", args, {{"MEMD_COMPAT_LOG", log_path()}}).ok());
    ASSERT_TRUE(manager_->WaitReady().ok()) << manager_->WaitReady() << "\n" << Log();
  }

  std::string log_path() const { return log_dir_.Join("memd.log"); }
  std::string Log() const { return ReadWhole(log_path()).value_or(""); }

  std::unique_ptr<Client> Connect() { return test::ConnectOrFail(dir_.path()); }


  // Puts the golden segments and state (its bytes as given) in the store.
  void Preload(const Golden& golden, const std::string& state_bytes) {
    for (const GoldenSegment& segment : golden.segments) {
      absl::StatusOr<UniqueFd> fd = MakeSegment(segment, golden.buffers);
      ASSERT_TRUE(fd.ok()) << fd.status();
      ASSERT_TRUE(manager_->Preload(segment.name, fd->get()).ok());
    }
    absl::StatusOr<UniqueFd> state = MakeState(golden, state_bytes);
    ASSERT_TRUE(state.ok()) << state.status();
    ASSERT_TRUE(manager_->Preload(golden.state_name, state->get()).ok());
  }

  static void ExpectPattern(Client& client, const GoldenBuffer& buffer) {
    const BufferInfo& info = buffer.info;
    auto opened = client.Open(info.name, {.access = info.state == BufferState::kSealed
                                                        ? Access::kRead
                                                        : Access::kReadWrite});
    ASSERT_TRUE(opened.ok()) << info.name << ": " << opened.status();
    EXPECT_TRUE(test::MatchesPattern(opened->data(), buffer.seed)) << info.name;
  }

  test::TempDir dir_;
  test::TempDir log_dir_;
  std::unique_ptr<test::ServiceManager> manager_;
};

TEST_F(StateCompatTest, AVersion1StateAnEarlierBuildWroteIsAdoptedWhole) {
  absl::StatusOr<Golden> golden = ReadGolden();
  ASSERT_TRUE(golden.ok()) << golden.status();
  Preload(*golden, golden->state_bytes);
  StartMemd({"--recovery-grace-seconds", "3600"});
  auto client = Connect();
  ASSERT_NE(client, nullptr);

  auto listed = client->List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::vector<std::string> expected;
  for (const GoldenBuffer& buffer : golden->buffers) expected.push_back(Describe(buffer.info));
  EXPECT_THAT(Describe(*listed), UnorderedElementsAreArray(expected)) << Log();
  for (const GoldenBuffer& buffer : golden->buffers) ExpectPattern(*client, buffer);

  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_TRUE(stats->durability.recording) << stats->durability.not_recording;
  EXPECT_TRUE(stats->durability.recovered);
  EXPECT_EQ(stats->durability.generation, golden->generation + 1);
  EXPECT_EQ(stats->durability.adopted_segments, golden->segments.size());
  EXPECT_EQ(stats->durability.adopted_buffers, golden->buffers.size());
  EXPECT_EQ(stats->durability.lost_buffers, 0u);
  std::uint64_t reserved = 0;
  for (const PoolStats& pool : stats->pools) reserved += pool.reserved_bytes;
  std::uint64_t golden_bytes = 0;
  for (const GoldenSegment& segment : golden->segments) golden_bytes += segment.bytes;
  EXPECT_EQ(reserved, golden_bytes);

  // The segments stay stored; the golden state gives way to one of a later
  // epoch that this memd writes.
  std::vector<std::string> stored = manager_->Current().stored_names;
  std::set<std::string> states;
  for (const std::string& name : stored) {
    if (absl::StartsWith(name, "memd.state.")) states.insert(name);
  }
  ASSERT_EQ(states.size(), 1u) << Log();
  EXPECT_NE(*states.begin(), golden->state_name);
  for (const GoldenSegment& segment : golden->segments) {
    EXPECT_THAT(stored, testing::Contains(segment.name));
  }
}

TEST_F(StateCompatTest, ItsUnsealedAndEphemeralBuffersGoOnceTheGracePeriodEnds) {
  absl::StatusOr<Golden> golden = ReadGolden();
  ASSERT_TRUE(golden.ok()) << golden.status();
  std::vector<std::string> kept;
  bool some_go = false;
  for (const GoldenBuffer& buffer : golden->buffers) {
    if (buffer.goes_after_grace) {
      some_go = true;
    } else {
      kept.push_back(buffer.info.name);
    }
  }
  ASSERT_TRUE(some_go) << "the golden state has no buffer for the grace period";
  Preload(*golden, golden->state_bytes);
  StartMemd({"--recovery-grace-seconds", "1"});
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<std::string> names;
  ASSERT_TRUE(test::PollUntil([&] {
    names = test::ListedNames(*client);
    return names.size() == kept.size();
  }));
  EXPECT_THAT(names, UnorderedElementsAreArray(kept));
  for (const GoldenBuffer& buffer : golden->buffers) {
    if (!buffer.goes_after_grace) ExpectPattern(*client, buffer);
  }
}

TEST_F(StateCompatTest, AnotherFormatVersionStartsMemdEmptyAndSaysSo) {
  absl::StatusOr<Golden> golden = ReadGolden();
  ASSERT_TRUE(golden.ok()) << golden.status();
  // The version is read before the header's checksum (another version may
  // checksum differently), so the bumped field alone is what memd refuses.
  std::string bumped = golden->state_bytes;
  const std::uint32_t version = 2;
  std::memcpy(bumped.data() + kVersionAt, &version, sizeof version);
  Preload(*golden, bumped);
  StartMemd({"--recovery-grace-seconds", "3600"});
  auto client = Connect();
  ASSERT_NE(client, nullptr);

  test::ExpectNothingHeld(*client);
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_FALSE(stats->durability.recovered);
  EXPECT_EQ(stats->durability.generation, 1u);
  EXPECT_EQ(stats->durability.adopted_buffers, 0u);
  const std::string log = Log();
  EXPECT_THAT(log, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(log, HasSubstr("format version 2"));
  // Nothing of it is kept: the segments are dropped, and only the new
  // memd's own state is stored.
  std::vector<std::string> stored = manager_->Current().stored_names;
  ASSERT_EQ(stored.size(), 1u) << testing::PrintToString(stored);
  EXPECT_THAT(stored[0], HasSubstr("memd.state."));
  EXPECT_NE(stored[0], golden->state_name);
}

// Writes the golden files (see the top of this file); skipped unless
// MEMD_REGENERATE_GOLDEN=1.
TEST_F(StateCompatTest, RegenerateGolden) {
  const char* regenerate = std::getenv("MEMD_REGENERATE_GOLDEN");
  if (regenerate == nullptr || std::string(regenerate) != "1") {
    GTEST_SKIP() << "writes " << GoldenPath("") << " only with MEMD_REGENERATE_GOLDEN=1";
  }
  constexpr std::uint64_t kKiB = 1024;
  constexpr std::uint64_t kMiB = 1024 * kKiB;
  struct Made {
    std::string name;
    std::uint64_t size;
    std::uint32_t seed;
    CreateOptions options;
    bool seal;
  };
  const std::vector<Made> made = {
      {"golden/small-a", 3000, 11, {}, true},  // Size classes, 0600.
      {"golden/small-b", 70 * kKiB, 12, {.mode = 0644, .attrs = {{"dtype", "uint8"}}}, true},
      {"golden/large", 5 * kMiB + 17, 13,
       {.mode = 0644, .attrs = {{"dtype", "float16"}, {"shape", "4096,640"}}}, true},
      {"golden/pinned", 256 * kKiB, 14, {.location = "pinned", .mode = 0640}, true},
      {"golden/ephemeral", 8 * kKiB, 15, {.persistence = Persistence::kEphemeral}, true},
      {"golden/unsealed", 4 * kKiB, 16, {.mode = 0644}, false},
  };

  StartMemd();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<Buffer> held;  // The ephemeral and unsealed ones live on these.
  for (const Made& m : made) {
    auto buffer = client->Create(m.name, m.size, m.options);
    ASSERT_TRUE(buffer.ok()) << m.name << ": " << buffer.status();
    test::FillPattern(buffer->mutable_data(), m.seed);
    if (m.seal) {
      ASSERT_TRUE(buffer->Seal().ok());
    }
    held.push_back(*std::move(buffer));
  }
  auto listed = client->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_TRUE(manager_->Kill(SIGKILL).ok());
  ASSERT_TRUE(manager_->Wait().ok());

  std::string state_name;
  for (const std::string& name : manager_->Current().stored_names) {
    if (absl::StartsWith(name, "memd.state.")) state_name = name;
  }
  ASSERT_FALSE(state_name.empty());
  std::vector<UniqueFd> fds = manager_->DupStored(state_name);
  ASSERT_EQ(fds.size(), 1u);
  struct stat info;
  ASSERT_EQ(::fstat(fds[0].get(), &info), 0);
  std::string bytes(static_cast<std::size_t>(info.st_size), '\0');
  ASSERT_EQ(::pread(fds[0].get(), bytes.data(), bytes.size(), 0),
            static_cast<ssize_t>(bytes.size()));
  // Past the last frame the file is zeros (state_file.h): keep the frames.
  std::size_t end = bytes.find_last_not_of('\0') + 1;
  end = (end + 7) & ~std::size_t{7};
  bytes.resize(end);
  // Where each buffer's bytes sit is in the state only: read it back with
  // this build's loader (the compat test itself never decodes it).
  auto loaded = durable::StateFile::Load(fds[0].get());
  ASSERT_TRUE(loaded.ok()) << loaded.status();

  Json manifest;
  manifest["about"] =
      "A memd.state.<epoch> memfd (format version 1) that memd wrote while holding these "
      "buffers, killed with SIGKILL; each segment is a memfd of `bytes` (memd:host or "
      "memd:pinned, sealed shrink|grow|seal), each buffer's bytes at `offset` in `segment` "
      "are tests/client/pattern.h's FillPattern(seed). Written by MEMD_REGENERATE_GOLDEN=1 "
      "state_compat_test --gtest_filter=StateCompatTest.RegenerateGolden; never regenerate "
      "to make the test pass: a later build must read this one's files.";
  manifest["state"] = {{"name", state_name},
                       {"file", kStateFile},
                       {"format_version", durable::kStateFormatVersion},
                       {"stored_bytes", static_cast<std::uint64_t>(info.st_size)},
                       {"file_bytes", bytes.size()},
                       {"generation", loaded->state.generation}};
  manifest["segments"] = Json::array();
  const std::vector<std::string> stored = manager_->Current().stored_names;
  for (const auto& [id, segment] : loaded->state.segments) {
    ASSERT_THAT(stored, testing::Contains(durable::SegmentFdName(id)));
    manifest["segments"].push_back({{"name", durable::SegmentFdName(id)},
                                    {"id", id},
                                    {"location", segment.location},
                                    {"bytes", segment.bytes},
                                    {"small", segment.small}});
  }
  manifest["buffers"] = Json::array();
  for (const BufferInfo& b : *listed) {
    const Made* m = nullptr;
    for (const Made& candidate : made) {
      if (candidate.name == b.name) m = &candidate;
    }
    ASSERT_NE(m, nullptr) << b.name;
    ASSERT_TRUE(loaded->state.buffers.contains(b.id)) << b.name;
    const durable::BufferEntry& entry = loaded->state.buffers.at(b.id);
    manifest["buffers"].push_back(
        {{"name", b.name},
         {"id", b.id},
         {"size", b.size},
         {"location", b.location},
         {"owner_uid", b.owner_uid},
         {"owner_gid", b.owner_gid},
         {"mode", absl::StrFormat("%04o", b.mode)},
         {"state", StateName(b.state)},
         {"persistence", PersistenceName(b.persistence)},
         {"created_unix_ns", absl::ToUnixNanos(b.created)},
         {"sealed_unix_ns", b.sealed ? absl::ToUnixNanos(*b.sealed) : 0},
         {"creator_pid", b.creator_pid},
         {"attrs", b.attrs},
         {"seed", m->seed},
         {"segment", entry.segment_id},
         {"offset", entry.offset},
         {"goes_after_grace", !m->seal || b.persistence == Persistence::kEphemeral}});
  }
  ASSERT_EQ(manifest["buffers"].size(), made.size());
  std::filesystem::create_directories(MEMD_GOLDEN_DIR);
  std::ofstream(GoldenPath(kStateFile), std::ios::binary) << bytes;
  std::ofstream(GoldenPath(kManifestFile)) << manifest.dump(2) << "\n";
}

}  // namespace
}  // namespace memd
