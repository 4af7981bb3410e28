// memctl put --format safetensors and inspect of its buffers, end to end: a
// real memd (host backend), the real memctl, files made here. The buffer's
// name, bytes and attributes are those docs/safetensors.md promises, since
// memd.safetensors (Python) makes and finds the same buffers.

#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "nlohmann/json.hpp"
#include "tests/support/daemon_process.h"
#include "tests/support/files.h"
#include "tests/support/hostile.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::memd::test::BinDir;
using ::memd::test::DaemonProcess;
using ::memd::test::Describe;
using ::memd::test::ProgramResult;
using ::memd::test::ReadWholeFile;
using ::memd::test::RunProgram;
using ::memd::test::TempDir;
using ::memd::test::WriteWholeFile;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;
using Json = nlohmann::json;

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// Two tensors, metadata, the header padded with spaces to 8 bytes as the
// safetensors library writes it; tensor data 0, 1, 2, ...
constexpr char kHeaderJson[] =
    R"({"embed":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]},)"
    R"("bias":{"dtype":"F32","shape":[3],"data_offsets":[12,24]},)"
    R"("__metadata__":{"format":"pt","step":"1000"}})";

std::string Padded(std::string header) {
  while ((header.size() + 8) % 8 != 0) header.push_back(' ');
  return header;
}

std::string FileBytes(const std::string& header, std::size_t data_bytes) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) {
    bytes.push_back(static_cast<char>((std::uint64_t{header.size()} >> (8 * i)) & 0xff));
  }
  bytes += header;
  for (std::size_t i = 0; i < data_bytes; ++i) bytes.push_back(static_cast<char>(i));
  return bytes;
}

// docs/safetensors.md's fingerprint, computed here from stat(2) and the
// header without memctl's code.
std::string ExpectedFingerprint(const std::string& path, const std::string& header) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "stat failed";
  auto nanos = [](const struct timespec& time) {
    return static_cast<long long>(time.tv_sec) * 1000000000LL + time.tv_nsec;
  };
  const std::string preimage =
      absl::StrCat("memd-safetensors-v1\n", st.st_dev, ":", st.st_ino, ":", st.st_size, ":",
                   nanos(st.st_mtim), ":", nanos(st.st_ctim), "\n", header);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(preimage.data()), preimage.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

class MemctlSafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override { StartDaemon({}); }

  void StartDaemon(std::vector<std::string> args) {
    daemon_.reset();
    auto daemon = DaemonProcess::Start(std::move(args));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto client = Client::Connect({.socket_dir = daemon_->socket_dir()});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  ProgramResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket-dir", daemon_->socket_dir()});
    return RunProgram(BinDir() + "/memctl", args);
  }

  Json RunJson(const std::vector<std::string>& args) {
    ProgramResult result = Run(args);
    EXPECT_EQ(result.exit_code, 0) << Describe(result);
    Json json = Json::parse(result.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(json.is_discarded()) << "not JSON: " << result.out;
    return json;
  }

  // The model file, its mtime set to a fixed instant.
  std::string WriteModel(const std::string& name = "model.safetensors") {
    const std::string path = files_.Join(name);
    WriteWholeFile(path, FileBytes(header_, 24));
    const struct timespec times[2] = {{1700000000, 5}, {1700000000, 5}};
    EXPECT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
    return path;
  }

  std::string ExpectedName(const std::string& path, const std::string& place = "host") {
    return absl::StrCat("safetensors/", ExpectedFingerprint(path, header_).substr(0, 32), "/",
                        place);
  }

  std::vector<std::string> Names() {
    std::vector<std::string> names;
    auto listed = client_->List();
    EXPECT_TRUE(listed.ok()) << listed.status();
    if (listed.ok()) {
      for (const BufferInfo& info : *listed) names.push_back(info.name);
    }
    return names;
  }

  const std::string header_ = Padded(kHeaderJson);
  TempDir files_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(MemctlSafetensorsTest, PutNamesTheBufferByFingerprintAndCopiesTheWholeFile) {
  const std::string path = WriteModel();
  const std::string name = ExpectedName(path);
  Json put = RunJson({"put", "--format", "safetensors", "--mode", "0644", "--json", path});
  EXPECT_EQ(put.at("name"), name);
  EXPECT_EQ(put.at("already_loaded"), false);
  EXPECT_EQ(put.at("state"), "sealed");
  EXPECT_EQ(put.at("persistence"), "persistent");
  EXPECT_EQ(put.at("mode"), "0644");
  EXPECT_EQ(put.at("location"), "host");
  EXPECT_EQ(put.at("size_bytes"), 8 + header_.size() + 24);
  EXPECT_EQ(put.at("tensor_count"), 2);
  EXPECT_EQ(put.at("attrs"),
            Json({{"format", "safetensors"},
                  {"safetensors.fingerprint", ExpectedFingerprint(path, header_)},
                  {"safetensors.file_size", absl::StrCat(8 + header_.size() + 24)},
                  {"safetensors.mtime_ns", "1700000000000000005"},
                  {"safetensors.header_bytes", absl::StrCat(header_.size())},
                  {"safetensors.file", "model.safetensors"}}));

  // The buffer holds the file, byte for byte.
  ProgramResult get = Run({"get", name});
  ASSERT_EQ(get.exit_code, 0) << Describe(get);
  EXPECT_EQ(get.out, ReadWholeFile(path));
}

TEST_F(MemctlSafetensorsTest, PutPrintsTheNameInText) {
  const std::string path = WriteModel();
  ProgramResult put = Run({"put", "--format", "safetensors", path});
  ASSERT_EQ(put.exit_code, 0) << Describe(put);
  EXPECT_THAT(put.out, AllOf(StartsWith(absl::StrCat("put ", ExpectedName(path), ": ")),
                             HasSubstr("sealed; 2 tensors from " + path)));
  EXPECT_THAT(put.err, IsEmpty());
}

TEST_F(MemctlSafetensorsTest, ASecondPutReportsTheBufferAlreadyLoaded) {
  const std::string path = WriteModel();
  Json first = RunJson({"put", "--format", "safetensors", "--json", path});
  Json again = RunJson({"put", "--format", "safetensors", "--json", path});
  EXPECT_EQ(again.at("name"), first.at("name"));
  EXPECT_EQ(again.at("id"), first.at("id")) << "the same buffer, not a new one";
  EXPECT_EQ(again.at("already_loaded"), true);
  ProgramResult text = Run({"put", "--format", "safetensors", path});
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, StartsWith(absl::StrCat("put ", ExpectedName(path),
                                                ": already loaded: ")));
  EXPECT_EQ(Names().size(), 1u);
}

TEST_F(MemctlSafetensorsTest, ATouchedFileLoadsUnderANewName) {
  const std::string path = WriteModel();
  Json first = RunJson({"put", "--format", "safetensors", "--json", path});
  const struct timespec later[2] = {{1700000001, 0}, {1700000001, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), later, 0), 0);
  Json second = RunJson({"put", "--format", "safetensors", "--json", path});
  EXPECT_NE(second.at("name"), first.at("name"));
  EXPECT_EQ(second.at("name"), ExpectedName(path));
  EXPECT_EQ(second.at("already_loaded"), false);
  EXPECT_EQ(Names().size(), 2u);
}

TEST_F(MemctlSafetensorsTest, InspectShowsTheTensorsAndMetadataFromTheBuffer) {
  const std::string path = WriteModel();
  const std::string name = ExpectedName(path);
  ASSERT_EQ(Run({"put", "--format", "safetensors", path}).exit_code, 0);
  const std::size_t data = 8 + header_.size();

  ProgramResult inspect = Run({"inspect", name});
  ASSERT_EQ(inspect.exit_code, 0) << Describe(inspect);
  EXPECT_THAT(inspect.out, HasSubstr(absl::StrCat("2 tensors (header ", header_.size(),
                                                  " bytes; tensor data from byte ", data,
                                                  ")")));
  EXPECT_THAT(inspect.out,
              ContainsRegex(absl::StrCat("TENSOR +DTYPE +SHAPE +OFFSET +BYTES\n"
                                         "embed +F16 +\\[2, 3\\] +",
                                         data, " +12\n"
                                               "bias +F32 +\\[3\\] +",
                                         data + 12, " +12\n")));
  EXPECT_THAT(inspect.out, AllOf(ContainsRegex("format +pt"), ContainsRegex("step +1000")));

  Json json = RunJson({"inspect", "--json", name});
  EXPECT_EQ(json.at("name"), name);
  EXPECT_EQ(json.at("tensors"),
            Json::parse(absl::StrCat(
                R"([{"name":"embed","dtype":"F16","shape":[2,3],"offset":)", data,
                R"(,"size_bytes":12},{"name":"bias","dtype":"F32","shape":[3],"offset":)",
                data + 12, R"(,"size_bytes":12}])")));
  EXPECT_EQ(json.at("metadata"), Json({{"format", "pt"}, {"step", "1000"}}));
}

TEST_F(MemctlSafetensorsTest, InspectOfOtherBuffersShowsNoTensors) {
  WriteWholeFile(files_.Join("plain"), "plain bytes");
  ASSERT_EQ(Run({"put", "plain", files_.Join("plain")}).exit_code, 0);
  Json json = RunJson({"inspect", "--json", "plain"});
  EXPECT_FALSE(json.contains("tensors"));
  EXPECT_FALSE(json.contains("tensors_error"));
  ProgramResult text = Run({"inspect", "plain"});
  EXPECT_THAT(text.out, Not(HasSubstr("tensors")));
}

// A buffer that claims the format but whose bytes or attributes are no
// header: inspect still shows the buffer, and one line about the tensors.
TEST_F(MemctlSafetensorsTest, InspectOfABufferThatDoesNotParseShowsAnErrorLine) {
  const std::string garbage = files_.Join("garbage");
  const std::string header = R"({"w":{"dtype":"F32","shape":[9],"data_offsets":[0,4]}})";
  WriteWholeFile(garbage, FileBytes(header, 4));
  const std::string length = absl::StrCat(header.size());
  const std::string size = absl::StrCat(8 + header.size() + 4);
  struct Case {
    std::string name;
    std::string header_bytes;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"bad/length", length, "tensor \\\"w\\\": data_offsets [0, 4] hold 4 bytes"},
      {"bad/attr-huge", "99999999999999", "no header length for a buffer of"},
      {"bad/attr-text", "lots", "no header length"},
      {"bad/attr-past", size, "no header length"},
      {"bad/attr-other", "20", "first 8 bytes say its header has " + length + " bytes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ProgramResult put = Run({"put", "--attr", "format=safetensors", "--attr",
                             "safetensors.header_bytes=" + c.header_bytes, c.name, garbage});
    ASSERT_EQ(put.exit_code, 0) << Describe(put);
    ProgramResult text = Run({"inspect", c.name});
    EXPECT_EQ(text.exit_code, 0) << Describe(text);
    EXPECT_THAT(text.out, AllOf(HasSubstr("name "), HasSubstr("tensors: cannot show them: "
                                                              "INVALID_ARGUMENT: ")));
    Json json = RunJson({"inspect", "--json", c.name});
    EXPECT_THAT(json.value("tensors_error", ""), StartsWith("INVALID_ARGUMENT: "));
    EXPECT_THAT(json.dump(), HasSubstr(c.message));
    EXPECT_FALSE(json.contains("tensors"));
  }
}

TEST_F(MemctlSafetensorsTest, InspectOfABufferStillBeingLoadedSaysSo) {
  auto buffer = client_->Create("safetensors/loading/host", 64,
                                {.attrs = {{"format", "safetensors"},
                                           {"safetensors.header_bytes", "8"}}});
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  Json json = RunJson({"inspect", "--json", "safetensors/loading/host"});
  EXPECT_THAT(json.value("tensors_error", ""),
              AllOf(StartsWith("FAILED_PRECONDITION: "), HasSubstr("not sealed yet")));
}

TEST_F(MemctlSafetensorsTest, AnInvalidFileIsRefusedNamingTheTensorAndLeavesNoBuffer) {
  const std::string path = files_.Join("bad.safetensors");
  WriteWholeFile(path, FileBytes(R"({"w":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}})",
                                 4));
  ProgramResult put = Run({"put", "--format", "safetensors", path});
  EXPECT_EQ(put.exit_code, kExitFailed) << Describe(put);
  EXPECT_THAT(put.out, IsEmpty());
  EXPECT_THAT(put.err,
              AllOf(StartsWith("memctl: put --format safetensors: INVALID_ARGUMENT: " + path),
                    HasSubstr("tensor \"w\": data_offsets [0, 4] hold 4 bytes, but F16 [3] "
                              "takes 6")));
  WriteWholeFile(path, "short");
  EXPECT_THAT(Run({"put", "--format", "safetensors", path}).err,
              HasSubstr("5 bytes, fewer than the 8"));
  EXPECT_THAT(Run({"put", "--format", "safetensors", files_.path()}).err,
              HasSubstr("not a regular file"));
  EXPECT_THAT(Names(), IsEmpty());
}

TEST_F(MemctlSafetensorsTest, OptionsThatContradictTheFormatAreUsageErrors) {
  const std::string path = WriteModel();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"put", "--format", "safetensors", "w", path}, "takes FILE alone, not 'w' too"},
      {{"put", "--format", "safetensors"}, "needs FILE"},
      {{"put", "--format", "safetensors", "-"}, "not stdin"},
      {{"put", "--format", "safetensors", "--attr", "a=b", path}, "no --attr"},
      {{"put", "--format", "safetensors", "--size", "100", path}, "no --size"},
      {{"put", "--format", "safetensors", "--max-stream", "1MiB", path}, "no --max-stream"},
      {{"put", "--format", "safetensors", "--ephemeral", path}, "no --ephemeral"},
      {{"put", "--format", "numpy", path}, "'numpy' is no format"},
      {{"put", path}, "put needs NAME and FILE"},
  };
  for (const auto& [args, message] : cases) {
    ProgramResult result = Run(args);
    EXPECT_EQ(result.exit_code, kExitUsage) << absl::StrJoin(args, " ") << Describe(result);
    EXPECT_THAT(result.out, IsEmpty());
    EXPECT_THAT(result.err, AllOf(StartsWith("memctl: usage: INVALID_ARGUMENT: "),
                                  HasSubstr(message)))
        << absl::StrJoin(args, " ");
  }
  EXPECT_THAT(Names(), IsEmpty());
}

// The name is taken by a buffer that is not this file's, or not finished:
// ALREADY_EXISTS saying which, and the buffer stays as it is.
TEST_F(MemctlSafetensorsTest, ANameTakenByOtherBytesOrAnUnsealedLoadIsAlreadyExists) {
  const std::string path = WriteModel();
  const std::string name = ExpectedName(path);
  WriteWholeFile(files_.Join("other"), "other bytes");
  ASSERT_EQ(Run({"put", name, files_.Join("other")}).exit_code, 0);
  ProgramResult put = Run({"put", "--format", "safetensors", path});
  EXPECT_EQ(put.exit_code, kExitFailed) << Describe(put);
  EXPECT_THAT(put.err, AllOf(StartsWith(absl::StrCat("memctl: put ", name, ": ALREADY_EXISTS: ")),
                             HasSubstr("is not " + path + "'s: its fingerprint is ''")));
  EXPECT_EQ(Run({"get", name}).out, "other bytes");
  ASSERT_TRUE(client_->Unlink(name).ok());

  // Another loader's, not sealed yet (its attributes are already right).
  auto loading = client_->Create(
      name, 8 + header_.size() + 24,
      {.attrs = {{"safetensors.fingerprint", ExpectedFingerprint(path, header_)}}});
  ASSERT_TRUE(loading.ok()) << loading.status();
  ProgramResult unsealed = Run({"put", "--format", "safetensors", path});
  EXPECT_EQ(unsealed.exit_code, kExitFailed) << Describe(unsealed);
  EXPECT_THAT(unsealed.err, AllOf(HasSubstr("ALREADY_EXISTS"), HasSubstr("being loaded")));
}

// docs/safetensors.md: a buffer of the name owned by anyone but this user
// or root is refused, naming its owner: they could have put other bytes
// there under the file's name.
TEST_F(MemctlSafetensorsTest, ABufferOfTheNameOwnedByAnotherUserIsPermissionDenied) {
  StartDaemon({"--backend", "host", "--socket-mode", "0666"});
  test::LetOthersTraverse(daemon_->socket_dir());
  test::LetOthersTraverse(files_.path());
  const std::string path = WriteModel();
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  const std::string name = ExpectedName(path);
  // Mallory loads it first (memctl in a fresh process: no gRPC across fork).
  const std::string memctl = BinDir() + "/memctl";
  const std::string socket_dir = daemon_->socket_dir();
  test::ChildResult mallory = test::ForkAs(test::kMallory, test::kMallory, [&](int out) {
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    ::execl(memctl.c_str(), memctl.c_str(), "--socket-dir", socket_dir.c_str(), "put",
            "--format", "safetensors", "--mode", "0644", path.c_str(), nullptr);
    return 127;
  });
  ASSERT_EQ(mallory.exit_code, 0) << mallory.out;
  ASSERT_THAT(mallory.out, HasSubstr(name)) << "the same file state, the same name";
  // The fingerprint is the file's: ctime may not change in between.
  ASSERT_EQ(ExpectedName(path), name);

  ProgramResult put = Run({"put", "--format", "safetensors", path});
  EXPECT_EQ(put.exit_code, kExitFailed) << Describe(put);
  EXPECT_THAT(put.err,
              AllOf(StartsWith(absl::StrCat("memctl: put ", name, ": PERMISSION_DENIED: ")),
                    HasSubstr("uid 61003"), HasSubstr("neither you nor root")));
}

}  // namespace
}  // namespace memd
