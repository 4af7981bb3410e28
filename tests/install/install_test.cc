// The installed package: `cmake --install` of this build into a temporary
// prefix puts every piece where the issue says, the unit it writes passes
// systemd-analyze, the sysusers.d file creates the user, and a separate
// project finds memd with find_package, links memd::client and talks to a
// real daemon, as does the installed memctl.

#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/daemon_process.h"
#include "tests/support/files.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using test::DaemonProcess;
using test::Describe;
using test::PathExists;
using test::ProgramResult;
using test::ReadWholeFile;
using test::RunProgram;
using test::TempDir;
using test::WriteWholeFile;

// Where the build's GNUInstallDirs put things, relative to the prefix.
constexpr char kBinDir[] = MEMD_INSTALL_BINDIR;
constexpr char kLibDir[] = MEMD_INSTALL_LIBDIR;
constexpr char kIncludeDir[] = MEMD_INSTALL_INCLUDEDIR;
constexpr char kConfigDir[] = MEMD_INSTALL_CONFIG_DIR;
constexpr char kDocDir[] = MEMD_INSTALL_DOCDIR;
constexpr char kManDir[] = MEMD_INSTALL_MANDIR;
constexpr char kDataDir[] = MEMD_INSTALL_DATADIR;
constexpr char kUnitDir[] = MEMD_INSTALL_UNIT_DIR;
constexpr char kSysusersDir[] = MEMD_INSTALL_SYSUSERS_DIR;
// Empty when the build has no Python package (MEMD_BUILD_PYTHON=OFF).
constexpr char kPythonPackageDir[] = MEMD_INSTALL_PYTHON_PACKAGE_DIR;

// A program that uses only the installed package: connect, create, write,
// seal, open read-only, print what the mapping holds.
constexpr char kConsumerCMakeLists[] = R"(cmake_minimum_required(VERSION 3.25)
project(memd_consumer LANGUAGES CXX)
find_package(memd 0.4 REQUIRED)
add_executable(app main.cc)
target_compile_options(app PRIVATE -Wall -Wextra)
target_link_libraries(app PRIVATE memd::client)
)";

constexpr char kConsumerMain[] = R"(#include <cstdio>
#include <cstring>
#include <string>

#include "memd/client.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string name = argv[1], text = argv[2];
  auto client = memd::Client::Connect();  // $MEMD_SOCKET_DIR
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto created = (*client)->Create(name, text.size());
  if (!created.ok()) {
    std::fprintf(stderr, "create: %s\n", created.status().ToString().c_str());
    return 1;
  }
  std::memcpy(created->mutable_data().data(), text.data(), text.size());
  if (absl::Status sealed = created->Seal(); !sealed.ok()) {
    std::fprintf(stderr, "seal: %s\n", sealed.ToString().c_str());
    return 1;
  }
  auto opened = (*client)->Open(name, {.wait = absl::Seconds(5)});
  if (!opened.ok()) {
    std::fprintf(stderr, "open: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  std::string read(reinterpret_cast<const char*>(opened->data().data()),
                   opened->data().size());
  std::printf("%s holds \"%s\", sealed: %s\n", name.c_str(), read.c_str(),
              opened->info().state == memd::BufferState::kSealed ? "yes" : "no");
  return 0;
}
)";

class InstallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::StartsWith(kConfigDir, "/")) {
      GTEST_SKIP() << "this build installs its configuration to the absolute "
                   << kConfigDir << " (prefix /usr or /opt): installing it "
                   << "into a temporary prefix would write outside it";
    }
    ProgramResult install =
        RunProgram(MEMD_CMAKE, {"--install", MEMD_BUILD_DIR, "--prefix", prefix_},
                   "", {}, absl::Seconds(120));
    ASSERT_EQ(install.exit_code, 0) << Describe(install);
  }

  std::string Installed(const std::string& dir, const std::string& name) const {
    return absl::StrCat(prefix_, "/", dir, "/", name);
  }

  TempDir dir_;
  const std::string prefix_ = dir_.Join("prefix");
};

TEST_F(InstallTest, PutsProgramsLibraryPackageUnitAndConfigurationInThePrefix) {
  for (const char* program : {"memd", "memctl", "memd-replay", "memd-tracegen"}) {
    const std::string path = Installed(kBinDir, program);
    ASSERT_TRUE(PathExists(path)) << path;
    // Runs from the prefix, needing nothing from the build tree.
    ProgramResult version = RunProgram(path, {"--version"});
    EXPECT_EQ(version.exit_code, 0) << path << ": " << Describe(version);
    EXPECT_THAT(version.out + version.err, HasSubstr(MEMD_VERSION)) << path;
  }
  EXPECT_TRUE(PathExists(Installed(kIncludeDir, "memd/client.h")));
  for (const char* header :
       {"memd/client.h", "memd/records.h", "memd/options.h", "memd/memd.h"}) {
    EXPECT_EQ(ReadWholeFile(Installed(kIncludeDir, header)),
              ReadWholeFile(absl::StrCat(MEMD_SOURCE_DIR "/client/include/", header)))
        << header;
  }
  // The development link, the soname and the real file.
  EXPECT_TRUE(PathExists(Installed(kLibDir, "libmemd.so")));
  EXPECT_TRUE(PathExists(Installed(kLibDir, "libmemd.so." MEMD_SOVERSION)));
  EXPECT_TRUE(PathExists(Installed(kLibDir, "libmemd.so." MEMD_VERSION)));
  // It exports the C API and the classes of the public header and nothing
  // else: the internals, gRPC and protobuf code inside it stay private.
  ProgramResult symbols = RunProgram(
      MEMD_NM, {"--dynamic", "--defined-only", "--demangle", "--format=posix",
                Installed(kLibDir, "libmemd.so")});
  ASSERT_EQ(symbols.exit_code, 0) << Describe(symbols);
  int exported = 0;
  int c_functions = 0;
  for (absl::string_view line : absl::StrSplit(symbols.out, '\n', absl::SkipEmpty())) {
    ++exported;
    if (absl::StartsWith(line, "memd_")) {
      EXPECT_TRUE(absl::StrContains(line, " T ")) << "a C symbol that is no function: " << line;
      ++c_functions;
      continue;
    }
    EXPECT_TRUE(absl::StartsWith(line, "memd::Client::") ||
                absl::StartsWith(line, "memd::Buffer::") ||
                absl::StartsWith(line, "memd::Transfer::"))
        << "exported: " << line;
  }
  EXPECT_GT(exported, 10);
  EXPECT_GE(c_functions, 30);
  EXPECT_THAT(symbols.out, HasSubstr("memd_abi_version T "));
  for (const char* file : {"memdConfig.cmake", "memdConfigVersion.cmake",
                           "memdTargets.cmake"}) {
    EXPECT_TRUE(PathExists(Installed(kLibDir, absl::StrCat("cmake/memd/", file)))) << file;
  }
  // The package asks its users for Abseil only: gRPC, protobuf and the
  // internal libraries are inside libmemd.
  std::string targets = ReadWholeFile(Installed(kLibDir, "cmake/memd/memdTargets.cmake"));
  EXPECT_THAT(targets, HasSubstr("memd::client"));
  for (const char* internal : {"grpc", "protobuf", "memd_common", "memd_proto"}) {
    EXPECT_THAT(targets, Not(HasSubstr(internal)));
  }
  EXPECT_TRUE(PathExists(Installed(kUnitDir, "memd.service")));
  EXPECT_EQ(ReadWholeFile(Installed(kSysusersDir, "memd.conf")),
            ReadWholeFile(MEMD_SOURCE_DIR "/systemd/memd.sysusers"));
  EXPECT_EQ(ReadWholeFile(Installed(kConfigDir, "memd.toml")),
            ReadWholeFile(MEMD_SOURCE_DIR "/deploy/memd.toml"));
  EXPECT_TRUE(PathExists(Installed(kDocDir, "README.md")));
  // The man pages and completions (tools/clidoc), where man, bash-completion
  // and zsh look for them; the pages gzip -9n, as Debian wants.
  for (const char* page : {"man8/memd.8.gz", "man1/memctl.1.gz", "man1/memd-replay.1.gz",
                           "man1/memd-tracegen.1.gz"}) {
    ProgramResult man = RunProgram("/usr/bin/man", {"-l", Installed(kManDir, page)}, "",
                                   {{"MANPAGER", "cat"}, {"MANWIDTH", "80"}});
    EXPECT_EQ(man.exit_code, 0) << page << ": " << Describe(man);
    EXPECT_THAT(man.out, HasSubstr("SYNOPSIS")) << page;
  }
  for (const char* program : {"memd", "memctl", "memd-replay", "memd-tracegen"}) {
    std::string bash = Installed(kDataDir, absl::StrCat("bash-completion/completions/", program));
    // The function's name has '_' for '-' (clidoc::BashCompletion).
    const std::string function = absl::StrReplaceAll(program, {{"-", "_"}});
    EXPECT_THAT(ReadWholeFile(bash), HasSubstr(absl::StrCat("complete -F _", function, " ",
                                                            program, "\n")));
    std::string zsh = Installed(kDataDir, absl::StrCat("zsh/vendor-completions/_", program));
    EXPECT_THAT(ReadWholeFile(zsh), testing::StartsWith(absl::StrCat("#compdef ", program)));
  }
}

TEST_F(InstallTest, UnitStartsTheInstalledDaemonWithTheInstalledConfiguration) {
  std::string unit = ReadWholeFile(Installed(kUnitDir, "memd.service"));
  EXPECT_THAT(unit, HasSubstr(absl::StrCat(
                        "\nExecStart=", Installed(kBinDir, "memd"), " --config ",
                        Installed(kConfigDir, "memd.toml"), " --socket-dir /run/memd\n")));
  EXPECT_THAT(unit, HasSubstr("\nDocumentation=file://" +
                              Installed(kDocDir, "README.md") + "\n"));
  EXPECT_THAT(unit, Not(HasSubstr("@MEMD_"))) << "a placeholder was left unfilled";
  for (const char* line :
       {"Type=notify", "WatchdogSec=30s", "RuntimeDirectory=memd",
        "LimitMEMLOCK=infinity", "User=memd", "ExecReload=/bin/kill -HUP $MAINPID",
        "NoNewPrivileges=yes", "CapabilityBoundingSet=", "ProtectSystem=strict",
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"}) {
    EXPECT_THAT(unit, HasSubstr(absl::StrCat("\n", line, "\n")));
  }
  for (const char* breaks_gpus : {"PrivateDevices=yes", "MemoryDenyWriteExecute=yes",
                                  "ProtectClock=yes", "PrivateUsers=yes"}) {
    EXPECT_THAT(unit, Not(HasSubstr(absl::StrCat("\n", breaks_gpus))));
  }
}

// systemd-analyze verify needs no running systemd: it loads the unit file
// offline, checks every directive and that ExecStart's and ExecReload's
// programs exist. The installed unit names the installed memd, so this
// checks the file exactly as installed.
TEST_F(InstallTest, InstalledUnitPassesSystemdAnalyzeVerify) {
  if (std::string(MEMD_SYSTEMD_ANALYZE).empty()) {
    GTEST_SKIP() << "systemd-analyze not found (Debian package systemd)";
  }
  const std::string unit = Installed(kUnitDir, "memd.service");
  ProgramResult verify = RunProgram(MEMD_SYSTEMD_ANALYZE, {"verify", unit}, "",
                                    {{"SYSTEMD_LOG_COLOR", "0"}});
  EXPECT_EQ(verify.exit_code, 0) << Describe(verify);
  // Warnings do not change the exit status: there must be none about us.
  EXPECT_THAT(verify.out + verify.err, Not(HasSubstr("memd.service")))
      << Describe(verify);

  // A unit whose program is missing fails, so the check above means
  // something.
  const std::string broken = dir_.Join("memd.service");
  WriteWholeFile(broken, absl::StrReplaceAll(ReadWholeFile(unit),
                                        {{"/memd --config", "/memd-missing --config"}}));
  ProgramResult refused = RunProgram(MEMD_SYSTEMD_ANALYZE, {"verify", broken}, "",
                                     {{"SYSTEMD_LOG_COLOR", "0"}});
  EXPECT_NE(refused.exit_code, 0) << Describe(refused);
  EXPECT_THAT(refused.out + refused.err, HasSubstr("memd-missing")) << Describe(refused);
}

// systemd-analyze security scores the sandbox offline (systemd >= 250); the
// unit must stay well inside "OK" (below 4.0 of 10; an unsandboxed service
// scores 9.6).
TEST_F(InstallTest, InstalledUnitIsWellSandboxed) {
  if (std::string(MEMD_SYSTEMD_ANALYZE).empty()) {
    GTEST_SKIP() << "systemd-analyze not found (Debian package systemd)";
  }
  ProgramResult security = RunProgram(
      MEMD_SYSTEMD_ANALYZE,
      {"security", "--offline=yes", "--threshold=40", "--no-pager",
       Installed(kUnitDir, "memd.service")},
      "", {{"SYSTEMD_LOG_COLOR", "0"}, {"SYSTEMD_COLORS", "0"}});
  if (absl::StrContains(security.err, "unrecognized option")) {
    GTEST_SKIP() << "this systemd-analyze cannot score units offline";
  }
  EXPECT_EQ(security.exit_code, 0) << Describe(security);
  EXPECT_THAT(security.out, HasSubstr("Overall exposure level")) << Describe(security);
}

// systemd-sysusers applies the file to an empty root directory: the memd
// user, its group, and membership in the GPU groups.
TEST_F(InstallTest, SysusersFileCreatesTheUserInTheGpuGroups) {
  if (std::string(MEMD_SYSTEMD_SYSUSERS).empty()) {
    GTEST_SKIP() << "systemd-sysusers not found (Debian package systemd)";
  }
  const std::string root = dir_.Join("root");
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((root + "/etc").c_str(), 0755), 0);
  ProgramResult sysusers = RunProgram(
      MEMD_SYSTEMD_SYSUSERS,
      {absl::StrCat("--root=", root), Installed(kSysusersDir, "memd.conf")});
  ASSERT_EQ(sysusers.exit_code, 0) << Describe(sysusers);

  std::map<std::string, std::vector<std::string>> fields;  // name -> fields
  for (const char* file : {"/etc/passwd", "/etc/group"}) {
    for (absl::string_view line : absl::StrSplit(ReadWholeFile(root + file), '\n')) {
      std::vector<std::string> parts = absl::StrSplit(line, ':');
      if (parts.size() > 1) fields[absl::StrCat(file, ":", parts[0])] = parts;
    }
  }
  ASSERT_TRUE(fields.contains("/etc/passwd:memd"));
  const auto& user = fields["/etc/passwd:memd"];
  ASSERT_EQ(user.size(), 7u);
  EXPECT_LT(std::stoi(user[2]), 1000) << "a system user";
  ASSERT_TRUE(fields.contains("/etc/group:memd"));
  EXPECT_EQ(fields["/etc/group:memd"][2], user[3]) << "memd's primary group";
  for (const char* group : {"video", "render"}) {
    const std::string key = absl::StrCat("/etc/group:", group);
    ASSERT_TRUE(fields.contains(key)) << group;
    EXPECT_THAT(absl::StrSplit(fields[key].back(), ','), ::testing::Contains("memd"))
        << group;
  }
}

// A C program that knows only the prefix: pkg-config finds memd.pc there,
// and the README's C example builds with what it says and runs.
TEST_F(InstallTest, CProgramBuildsWithPkgConfigAndTalksToTheDaemon) {
  const std::map<std::string, std::string> pkg_env{
      {"PKG_CONFIG_PATH", Installed(kLibDir, "pkgconfig")}};
  ProgramResult flags = RunProgram(MEMD_PKG_CONFIG, {"--cflags", "--libs", "memd"}, "", pkg_env);
  ASSERT_EQ(flags.exit_code, 0) << Describe(flags);
  ProgramResult version = RunProgram(MEMD_PKG_CONFIG, {"--modversion", "memd"}, "", pkg_env);
  EXPECT_EQ(version.out, MEMD_VERSION "\n") << Describe(version);

  std::vector<std::string> args = {"-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror",
                                   MEMD_SOURCE_DIR "/client/examples/quickstart.c", "-o",
                                   dir_.Join("quickstart")};
  for (absl::string_view flag : absl::StrSplit(flags.out, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    args.emplace_back(flag);
  }
  for (absl::string_view flag : absl::StrSplit(MEMD_CONSUMER_FLAGS, ' ', absl::SkipEmpty())) {
    args.emplace_back(flag);
  }
  ProgramResult compile = RunProgram(MEMD_C_COMPILER, args, "", {}, absl::Seconds(120));
  ASSERT_EQ(compile.exit_code, 0) << Describe(compile);
  EXPECT_THAT(compile.out + compile.err, Not(HasSubstr("warning:")));

  auto daemon = DaemonProcess::Start();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  // pkg-config sets no run path: a prefix outside the linker's reach needs
  // LD_LIBRARY_PATH, as the README says.
  // Twice: the example unlinks its buffer, so that a reader can run it
  // again (issue 29: the second run failed with ALREADY_EXISTS).
  for (int round = 0; round < 2; ++round) {
    ProgramResult run = RunProgram(
        dir_.Join("quickstart"), {"quickstart/c", "hello from C"}, "",
        {{"MEMD_SOCKET_DIR", (*daemon)->socket_dir()},
         {"LD_LIBRARY_PATH", absl::StrCat(prefix_, "/", kLibDir)}});
    EXPECT_EQ(run.exit_code, 0) << "run " << round + 1 << ": " << Describe(run);
    EXPECT_EQ(run.out, "quickstart/c holds \"hello from C\" (encoding utf-8)\n");
  }
}

// Debian's python3 imports the installed package with the prefix's
// dist-packages on its path, loads the prefix's libmemd through the
// module's run path, and shares a buffer through a real daemon.
constexpr char kPythonConsumer[] = R"(import sys
import memd
import numpy as np
assert memd.__file__.startswith(sys.argv[1]), memd.__file__
libraries = {line.split()[-1] for line in open("/proc/self/maps") if "libmemd.so" in line}
assert libraries and all(path.startswith(sys.argv[1]) for path in libraries), libraries
with memd.connect() as client:
    with client.create_array("install/array", (4, 8), "float32") as buf:
        buf.numpy()[:] = np.arange(32, dtype=np.float32).reshape(4, 8)
        buf.seal()
    with client.open("install/array", timeout=5.0) as buf:
        print(buf.attrs["dtype"], buf.attrs["shape"], buf.numpy().sum())
)";

TEST_F(InstallTest, PythonFindsTheInstalledPackageAndItsLibrary) {
  if (std::string(kPythonPackageDir).empty()) {
    GTEST_SKIP() << "this build has no Python package (MEMD_BUILD_PYTHON=OFF)";
  }
  const std::string package = absl::StartsWith(kPythonPackageDir, "/")
                                  ? kPythonPackageDir
                                  : absl::StrCat(prefix_, "/", kPythonPackageDir);
  for (const char* file : {"__init__.py", "__init__.pyi", "py.typed", "_version.py"}) {
    EXPECT_TRUE(PathExists(absl::StrCat(package, "/", file))) << file;
  }
  auto daemon = DaemonProcess::Start();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  // Outside /usr and /usr/local the site directory must be on PYTHONPATH
  // (README, "Python"); nothing else is needed, no LD_LIBRARY_PATH.
  std::map<std::string, std::string> env{
      {"PYTHONPATH", package.substr(0, package.rfind('/'))},
      {"PYTHONDONTWRITEBYTECODE", "1"},
      {"MEMD_SOCKET_DIR", (*daemon)->socket_dir()}};
  if (std::string(MEMD_SANITIZER_PRELOAD).size() > 0) {
    env["LD_PRELOAD"] = MEMD_SANITIZER_PRELOAD;
    env["ASAN_OPTIONS"] = "detect_leaks=0";  // The interpreter's, not ours.
  }
  ProgramResult run =
      RunProgram("/usr/bin/python3", {"-c", kPythonConsumer, prefix_}, "", env);
  EXPECT_EQ(run.exit_code, 0) << Describe(run);
  EXPECT_EQ(run.out, "float32 4,8 496.0\n") << Describe(run);
}

// A separate project that knows only the prefix: find_package(memd),
// memd::client, and a real daemon to talk to.
TEST_F(InstallTest, SeparateProjectFindsThePackageLinksAndTalksToTheDaemon) {
  const std::string source = dir_.Join("consumer");
  const std::string build = dir_.Join("consumer-build");
  ASSERT_EQ(::mkdir(source.c_str(), 0755), 0);
  WriteWholeFile(source + "/CMakeLists.txt", kConsumerCMakeLists);
  WriteWholeFile(source + "/main.cc", kConsumerMain);

  ProgramResult configure = RunProgram(
      MEMD_CMAKE,
      {"-S", source, "-B", build, "-G", MEMD_GENERATOR,
       "-DCMAKE_MAKE_PROGRAM=" MEMD_MAKE_PROGRAM,
       "-DCMAKE_CXX_COMPILER=" MEMD_CXX_COMPILER, "-DCMAKE_BUILD_TYPE=Release",
       // A sanitized libmemd needs a sanitized program around it.
       "-DCMAKE_CXX_FLAGS=" MEMD_CONSUMER_FLAGS,
       "-DCMAKE_EXE_LINKER_FLAGS=" MEMD_CONSUMER_FLAGS,
       absl::StrCat("-DCMAKE_PREFIX_PATH=", prefix_)},
      "", {}, absl::Seconds(120));
  ASSERT_EQ(configure.exit_code, 0) << Describe(configure);
  ProgramResult compile = RunProgram(MEMD_CMAKE, {"--build", build}, "", {},
                                     absl::Seconds(120));
  ASSERT_EQ(compile.exit_code, 0) << Describe(compile);
  EXPECT_THAT(compile.out, Not(HasSubstr("warning:")));

  auto daemon = DaemonProcess::Start();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  // No LD_LIBRARY_PATH: the program finds libmemd in the prefix through the
  // RUNPATH CMake gives it.
  ProgramResult run = RunProgram(
      build + "/app", {"install/greeting", "hello from an installed libmemd"}, "",
      {{"MEMD_SOCKET_DIR", (*daemon)->socket_dir()}});
  EXPECT_EQ(run.exit_code, 0) << Describe(run) << "\nmemd:\n" << (*daemon)->Log();
  EXPECT_EQ(run.out,
            "install/greeting holds \"hello from an installed libmemd\", sealed: yes\n");

  // The buffer it left behind, read by the installed memctl.
  ProgramResult get = RunProgram(
      Installed(kBinDir, "memctl"),
      {"--socket-dir", (*daemon)->socket_dir(), "get", "install/greeting"});
  EXPECT_EQ(get.exit_code, 0) << Describe(get);
  EXPECT_EQ(get.out, "hello from an installed libmemd");
}

}  // namespace
}  // namespace memd
