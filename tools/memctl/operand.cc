#include "tools/memctl/operand.h"

namespace memd::memctl {

Operand ClassifyOperand(std::string_view text) {
  Operand operand;
  operand.text = std::string(text);
  if (text == "-") {
    operand.kind = Operand::Kind::kStdio;
  } else if (text.starts_with("/") || text.starts_with("./") ||
             text.starts_with("../")) {
    operand.kind = Operand::Kind::kFile;
  }
  return operand;
}

}  // namespace memd::memctl
