#pragma once

// memd_buffer_info and memd_buffer_list as the C API hands them out: one
// malloc'ed block each, structs first, then the attribute and replica arrays,
// then the strings, so that the caller frees everything with one call.

#include <cstdlib>
#include <memory>
#include <span>

#include "absl/status/statusor.h"

#include "memd/client.h"
#include "memd/memd.h"

namespace memd::c_api {

struct FreeBlock {
  void operator()(void* block) const { std::free(block); }
};
using InfoBlock = std::unique_ptr<memd_buffer_info, FreeBlock>;
using ListBlock = std::unique_ptr<memd_buffer_list, FreeBlock>;

// Throws std::bad_alloc when malloc fails (the C API's guard reports it).
InfoBlock FlatInfo(const BufferInfo& info);
ListBlock FlatList(std::span<const BufferInfo> infos);

// Hands a call's BufferInfo to a caller that asked for it (`out` not NULL)
// as one block it frees with memd_buffer_info_free.
absl::Status HandInfo(absl::StatusOr<BufferInfo> info, memd_buffer_info** out);

}  // namespace memd::c_api
