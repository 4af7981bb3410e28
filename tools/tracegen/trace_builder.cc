#include "tools/tracegen/trace_builder.h"

namespace memd::tracegen {

std::uint64_t TraceBuilder::Allocate(std::uint64_t bytes) {
  const std::uint64_t id = writer_.NextId();
  // A write error stays in the writer; the program reports it at the end.
  writer_.Write(pool::TraceEvent::Allocate(id, bytes)).IgnoreError();
  ++events_;
  return id;
}

void TraceBuilder::Free(std::uint64_t id) {
  writer_.Write(pool::TraceEvent::Free(id)).IgnoreError();
  ++events_;
}

}  // namespace memd::tracegen
