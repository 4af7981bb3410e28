// docs/security.md promises that every "cannot" in it has a test, and names
// the tests: each one named must exist, or the promise is hollow.

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace memd {
namespace {

std::string Read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ThreatModelDocTest, EveryTestItNamesExists) {
  const std::filesystem::path root = MEMD_SOURCE_DIR;
  // "Suite.Name" tests defined anywhere under tests/.
  std::set<std::string> defined;
  const std::regex test_macro(R"(\bTEST(?:_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\))");
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root / "tests")) {
    if (entry.path().extension() != ".cc") continue;
    const std::string source = Read(entry.path());
    for (std::sregex_iterator it(source.begin(), source.end(), test_macro), end;
         it != end; ++it) {
      defined.insert((*it)[1].str() + "." + (*it)[2].str());
    }
  }
  const std::string doc = Read(root / "docs/security.md");
  ASSERT_FALSE(doc.empty());
  const std::regex named(R"(`(?:\w+\s+)?([A-Z]\w*Test\.[A-Z]\w*)`)");
  int count = 0;
  for (std::sregex_iterator it(doc.begin(), doc.end(), named), end; it != end; ++it) {
    ++count;
    EXPECT_TRUE(defined.contains((*it)[1].str()))
        << "docs/security.md names " << (*it)[1].str() << ", which no test defines";
  }
  EXPECT_GE(count, 30) << "the threat model names fewer tests than it should";
}

}  // namespace
}  // namespace memd
