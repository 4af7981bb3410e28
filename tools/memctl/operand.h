#pragma once

// What an operand of `memctl cp` names, in this order: "-" is stdin or
// stdout; "buf:NAME" is the buffer NAME (no path or buffer name has that
// form: names hold no ':'); an operand starting with "/", "./" or "../"
// (which no buffer name can: common/names.cc has no empty, "." or ".."
// part), or a path that exists (a file, a directory, a link), is a file;
// anything else names a buffer. So an existing ./o.txt is never shadowed by
// a new buffer named o.txt, and a file not there yet is written as ./NAME.

#include <functional>
#include <string>
#include <string_view>

namespace memd::memctl {

struct Operand {
  enum class Kind { kBuffer, kFile, kStdio };
  Kind kind = Kind::kBuffer;
  std::string text;  // The name (without "buf:") or path.
};

inline constexpr std::string_view kBufferPrefix = "buf:";

// Whether `path` exists here (lstat: a dangling link too).
bool PathExists(const std::string& path);

Operand ClassifyOperand(std::string_view text,
                        const std::function<bool(const std::string&)>& exists = PathExists);

}  // namespace memd::memctl
