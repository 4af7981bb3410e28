#pragma once

// What an operand of `memctl cp` names. Buffer names never start with "/",
// "./" or "../" (common/names.cc: no empty, "." or ".." part), so those are
// files and everything else is a buffer; "-" is stdin or stdout.

#include <string>
#include <string_view>

namespace memd::memctl {

struct Operand {
  enum class Kind { kBuffer, kFile, kStdio };
  Kind kind = Kind::kBuffer;
  std::string text;  // The name or path, as given.
};

Operand ClassifyOperand(std::string_view text);

}  // namespace memd::memctl
