#pragma once

// Option structs of memd.h start with their own size, so they can grow: a
// program built against an older memd.h passes a smaller struct_size, and
// the fields it lacks keep their defaults. New fields must start past the
// old sizeof (padding included), or an old caller's trailing padding would
// be read as their value.

#include <cstddef>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace memd::c_api {

// The caller's options over the defaults of `init`; NULL gives the
// defaults. INVALID_ARGUMENT for a struct_size smaller than the size field
// or larger than this library's struct (a newer memd.h), with the numbers.
template <typename Options>
absl::StatusOr<Options> ReadOptions(const Options* given, void (*init)(Options*),
                                    const char* what) {
  Options options;
  init(&options);
  if (given == nullptr) return options;
  const std::size_t size = given->struct_size;
  if (size < sizeof(std::size_t) || size > sizeof(Options)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".struct_size is ", size, "; this libmemd reads ", sizeof(std::size_t), " to ",
        sizeof(Options), " bytes (was the program built against a newer memd.h? call ", what,
        "_init first)"));
  }
  std::memcpy(static_cast<void*>(&options), given, size);
  options.struct_size = sizeof(Options);
  return options;
}

}  // namespace memd::c_api
