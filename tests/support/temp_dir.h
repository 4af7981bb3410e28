#pragma once

#include <string>

namespace memd::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with everything in it
/// on destruction. Short paths: Unix socket paths are limited to 107 bytes.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace memd::test
