#pragma once

#include <cstddef>
#include <string>

namespace memd::test {

// The whole file as bytes; empty when it cannot be read (tests compare the
// result, so a missing file shows up as a difference).
std::string ReadWholeFile(const std::string& path);

// Replaces the file's contents with `bytes`.
void WriteWholeFile(const std::string& path, const std::string& bytes);

// `size` bytes that are the same for the same seed and differ between
// seeds: file contents whose every byte a round trip must keep.
std::string RandomBytes(std::size_t size, unsigned seed);

// Whether anything (a file, socket, or dangling link) is at `path`.
bool PathExists(const std::string& path);

// Bytes of the first `size` of the file open as `fd` (or at `path`) that
// the page cache holds (mincore); `size` when the file cannot be mapped.
std::size_t CachedBytes(int fd, std::size_t size);
std::size_t CachedBytes(const std::string& path, std::size_t size);

}  // namespace memd::test
