#pragma once

// Strings memd.h hands to the caller through a `char**`: malloc'ed, so that
// memd_string_free is free() whichever C runtime the caller has.

#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

namespace memd::c_api {

// A NUL-terminated copy of `text`. Throws std::bad_alloc when malloc fails
// (the C API's guard reports it).
inline char* NewString(std::string_view text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out == nullptr) throw std::bad_alloc();
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
  return out;
}

}  // namespace memd::c_api
