// The README's examples are programs the tests build and run: each code
// block below must be the file it names, byte for byte, so that what a
// reader copies is what the tests compile and run.

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace memd {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The fenced block of `language` that follows the first mention of `file`.
std::string BlockAfter(const std::string& doc, const std::string& file,
                       const std::string& language) {
  const std::size_t mention = doc.find("`" + file + "`");
  if (mention == std::string::npos) return "(README does not name " + file + ")";
  const std::string fence = "```" + language + "\n";
  const std::size_t start = doc.find(fence, mention);
  if (start == std::string::npos) return "(no ```" + language + " block after " + file + ")";
  const std::size_t body = start + fence.size();
  const std::size_t end = doc.find("```", body);
  return doc.substr(body, end - body);
}

TEST(ReadmeExamplesTest, TheCExampleIsTheProgramTheInstallTestRuns) {
  const std::string readme = Read(MEMD_SOURCE_DIR "/README.md");
  const std::string file = "client/examples/quickstart.c";
  EXPECT_EQ(BlockAfter(readme, file, "c"), Read(MEMD_SOURCE_DIR "/" + file));
}

TEST(ReadmeExamplesTest, ThePythonExampleIsTheScriptThePythonTestsRun) {
  const std::string readme = Read(MEMD_SOURCE_DIR "/README.md");
  const std::string file = "client/python/examples/quickstart.py";
  EXPECT_EQ(BlockAfter(readme, file, "python"), Read(MEMD_SOURCE_DIR "/" + file));
}

}  // namespace
}  // namespace memd
