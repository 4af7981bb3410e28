// docs/design.md opens with "Where things live": a map from each
// responsibility to its file, so that a new engineer finds their room at
// once. A map that names a file that is gone, or leaves out a room of the
// daemon, sends them to the wrong place: both fail here.

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace memd {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The files the map's rows name, relative to the source root. A cell lists
// paths in backquotes; a bare name ("listener.{h,cc}") lives in the folder
// of the path before it; "{h,cc}" stands for both; a path ending in '/' or
// holding '*' names a folder.
struct Map {
  std::set<std::string> files;
  std::set<std::string> folders;
};

Map ReadMap(const std::string& doc) {
  const std::size_t start = doc.find("## Where things live");
  const std::size_t end = doc.find("\n## ", start + 1);
  const std::string section = doc.substr(start, end - start);
  Map map;
  const std::regex quoted("`([^`]+)`");
  std::istringstream lines(section);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| ", 0) != 0) continue;
    const std::size_t bar = line.find('|', 2);
    const std::string cell = line.substr(bar + 1);
    std::string folder;
    for (std::sregex_iterator it(cell.begin(), cell.end(), quoted), stop; it != stop; ++it) {
      std::string path = (*it)[1].str();
      if (path.find('/') == std::string::npos) path = folder + "/" + path;
      if (path.back() == '/' || path.find('*') != std::string::npos) {
        folder = fs::path(path.substr(0, path.find('*'))).parent_path().string();
        if (path.back() == '/') folder = path.substr(0, path.size() - 1);
        map.folders.insert(folder);
        continue;
      }
      folder = fs::path(path).parent_path().string();
      const std::string both = ".{h,cc}";
      if (path.size() > both.size() &&
          path.compare(path.size() - both.size(), both.size(), both) == 0) {
        const std::string stem = path.substr(0, path.size() - both.size());
        map.files.insert(stem + ".h");
        map.files.insert(stem + ".cc");
      } else {
        map.files.insert(path);
      }
    }
  }
  return map;
}

TEST(DesignMapTest, EveryFileTheMapNamesExists) {
  const fs::path root = MEMD_SOURCE_DIR;
  const Map map = ReadMap(Read(root / "docs/design.md"));
  ASSERT_GE(map.files.size(), 60u) << "the map names fewer files than it should";
  for (const std::string& file : map.files) {
    EXPECT_TRUE(fs::exists(root / file)) << "docs/design.md's map names " << file
                                         << ", which is not in the tree";
  }
  for (const std::string& folder : map.folders) {
    EXPECT_TRUE(fs::is_directory(root / folder))
        << "docs/design.md's map names the folder " << folder << ", which is not in the tree";
  }
}

TEST(DesignMapTest, EveryRoomOfTheDaemonIsOnTheMap) {
  const fs::path root = MEMD_SOURCE_DIR;
  const Map map = ReadMap(Read(root / "docs/design.md"));
  for (const char* module : {"daemon", "daemon/service", "daemon/session", "daemon/broker",
                             "daemon/pool", "daemon/metrics", "client/src", "common"}) {
    for (const auto& entry : fs::directory_iterator(root / module)) {
      const std::string extension = entry.path().extension().string();
      if (extension != ".h" && extension != ".cc") continue;
      const std::string file = fs::relative(entry.path(), root).string();
      EXPECT_TRUE(map.files.contains(file) || map.folders.contains(module))
          << file << " is not on docs/design.md's map (\"Where things live\")";
    }
  }
}

}  // namespace
}  // namespace memd
