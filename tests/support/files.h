#pragma once

#include <string>

namespace memd::test {

// The whole file as bytes; empty when it cannot be read (tests compare the
// result, so a missing file shows up as a difference).
std::string ReadWholeFile(const std::string& path);

// Replaces the file's contents with `bytes`.
void WriteWholeFile(const std::string& path, const std::string& bytes);

// Whether anything (a file, socket, or dangling link) is at `path`.
bool PathExists(const std::string& path);

}  // namespace memd::test
