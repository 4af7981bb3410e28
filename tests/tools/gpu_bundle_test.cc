// tools/gpu-bundle packs the GPU checks for a machine that has none of
// memd's packages. These tests make a bundle from this build and run it as
// that machine would: with an empty environment, the build tree out of
// reach of the bundle's programs, and nothing but the C library from the
// system.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using test::BinDir;
using test::Describe;
using test::ProgramResult;
using test::RunProgram;

#if defined(__SANITIZE_ADDRESS__)
// Sanitized programs are larger and load the sanitizers' runtimes; the 60 MiB
// promise is for the build tools/gpu-check makes.
// 312 MiB once the Level Zero programs joined (real_ze_test, its client);
// 455 MiB with issue 26 (NUMA placement, device accounting). The release
// bundle, the one that travels, was 49 MiB then.
constexpr const char* kLimitMib = "600";
// No wheel: a sanitized libmemd loads into a Python only under LD_PRELOAD of
// the ASan runtime, which a bundle's clean environment does not give (the
// Python tests run under the sanitizers in python.*, with the preload).
constexpr const char* kWithPython = "0";
#else
constexpr const char* kLimitMib = "60";
constexpr const char* kWithPython = "1";
#endif

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ProgramResult Bundle(const std::string& build, const std::string& out,
                     const std::string& limit_mib) {
  return RunProgram(std::string(MEMD_SOURCE_DIR) + "/tools/gpu-bundle", {build, out}, "",
                    {{"MEMD_BUNDLE_MAX_MIB", limit_mib}, {"MEMD_BUNDLE_PYTHON", kWithPython}},
                    absl::Minutes(3));
}

TEST(GpuBundleTest, ABundleRunsItsChecksWithNothingButTheCLibraryFromTheSystem) {
  test::TempDir dir;
  const std::string bundle = dir.path() + "/bundle";
  const std::string build = fs::path(BinDir()).parent_path().string();
  ProgramResult made = Bundle(build, bundle, kLimitMib);
  ASSERT_EQ(made.exit_code, 0) << Describe(made);
  EXPECT_THAT(made.out, HasSubstr("on the GPU machine: " + bundle + "/run"));

  // Every library a program or the fake driver loads resolves inside the
  // bundle, but for the C library's own.
  for (const char* object : {"bin/memd", "bin/memctl", "bin/memd-test-client",
                             "bin/memd-c-api-test", "bin/real_gpu_test", "bin/memd-transfer-bench",
                             "bin/memd-device-open-bench",
                             "bin/memd-ze-test-client", "bin/real_ze_test",
                             "lib-fake/libcuda.so.1", "lib-fake/libmemd_fake_ze.so",
                             "lib-ze/libze_loader.so.1"}) {
    ProgramResult ldd = RunProgram("/usr/bin/ldd", {bundle + "/" + object}, "",
                                   {{"LD_LIBRARY_PATH", bundle + "/lib"}});
    ASSERT_EQ(ldd.exit_code, 0) << object << ": " << Describe(ldd);
    std::istringstream lines(ldd.out);
    for (std::string line; std::getline(lines, line);) {
      const std::size_t arrow = line.find("=> /");
      if (arrow == std::string::npos) continue;
      const std::string path = line.substr(arrow + 3);
      const bool inside = path.rfind(bundle + "/lib/", 0) == 0;
      const bool c_library = path.find("/libc.so") != std::string::npos ||
                             path.find("/libm.so") != std::string::npos;
      EXPECT_TRUE(inside || c_library) << object << " loads from outside the bundle: " << line;
    }
  }

  // The Python benchmarks travel with the tests, and so does the weights
  // headline's smoke run on the fake driver (test_weights_bench.py, which
  // the Python checks below run).
  if (std::string(kWithPython) == "1") {
    for (const char* file : {"tests/bench/weights_bench.py", "tests/bench/python_overhead_bench.py",
                             "tests/python/test_weights_bench.py",
                             "tests/python/memd_daemon.py"}) {
      EXPECT_TRUE(fs::exists(bundle + "/" + file)) << "the bundle lacks " << file;
    }
  }

  // Run as on the GPU machine: an empty environment, so neither this
  // build's paths nor its libraries can help. In a sanitized build,
  // LeakSanitizer's exit-time scan once crashed in its own tracer ("Tracer
  // caught signal 11") in a client under load; leaks of these programs are
  // what their own tests check, so the bundle's run goes without it.
  const std::string report = dir.path() + "/report";
  ProgramResult ran = RunProgram("/usr/bin/env", {"-i", "PATH=/usr/bin:/bin",
                                                  "ASAN_OPTIONS=detect_leaks=0",
                                                  bundle + "/run", report},
                                 "", {}, absl::Minutes(3));
  const std::string summary = Read(report + "/report.txt");
  ASSERT_EQ(ran.exit_code, 0) << Describe(ran) << "--- fake_driver.log ---\n"
                              << Read(report + "/fake_driver.log");
  // Every test ran and passed on the fake: none skipped, however many there are.
  EXPECT_THAT(summary, ::testing::ContainsRegex("fake_driver: ok \\(PASSED [1-9][0-9]* tests\\)"));
  EXPECT_THAT(summary, HasSubstr("real_driver: ok"));
  // Level Zero likewise: the fake under the bundle's loader passes every
  // test; this machine's own loader finds no Level Zero GPU and skips.
  EXPECT_THAT(summary,
              ::testing::ContainsRegex("fake_level_zero: ok \\(PASSED [1-9][0-9]* tests\\)"))
      << Read(report + "/fake_level_zero.log");
  EXPECT_THAT(summary, HasSubstr("real_level_zero: ok"));
  // The bench needs a GPU that answers; here none does, and the report says so.
  EXPECT_THAT(summary, HasSubstr("transfer bench: not run (no GPU answers here)"));
  EXPECT_THAT(summary, HasSubstr("programs: " + bundle + "/bin"))
      << "the tests must start the bundle's programs, not the build's";
}

TEST(GpuBundleTest, TheTestsFindTheirProgramsWhereTheBundleSays) {
  const std::string built = BinDir();
  ASSERT_EQ(::setenv("MEMD_BIN_DIR", "/opt/bundle/bin", 1), 0);
  EXPECT_EQ(BinDir(), "/opt/bundle/bin");
  ASSERT_EQ(::unsetenv("MEMD_BIN_DIR"), 0);
  EXPECT_EQ(BinDir(), built);
}

TEST(GpuBundleTest, ABundleOverItsSizeLimitIsRefusedWithTheNumbers) {
  test::TempDir dir;
  const std::string build = fs::path(BinDir()).parent_path().string();
  ProgramResult made = Bundle(build, dir.path() + "/bundle", "1");
  EXPECT_EQ(made.exit_code, 1) << Describe(made);
  EXPECT_THAT(made.err, HasSubstr("the limit is 1 MiB (MEMD_BUNDLE_MAX_MIB)"));
}

}  // namespace
}  // namespace memd
