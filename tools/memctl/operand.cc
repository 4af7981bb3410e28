#include "tools/memctl/operand.h"

#include <sys/stat.h>

namespace memd::memctl {

bool PathExists(const std::string& path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0;
}

Operand ClassifyOperand(std::string_view text,
                        const std::function<bool(const std::string&)>& exists) {
  Operand operand;
  operand.text = std::string(text);
  if (text == "-") {
    operand.kind = Operand::Kind::kStdio;
  } else if (text.starts_with(kBufferPrefix)) {
    operand.text = std::string(text.substr(kBufferPrefix.size()));
  } else if (text.starts_with("/") || text.starts_with("./") ||
             text.starts_with("../") || exists(operand.text)) {
    operand.kind = Operand::Kind::kFile;
  }
  return operand;
}

}  // namespace memd::memctl
