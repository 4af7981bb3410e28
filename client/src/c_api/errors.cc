#include "client/src/c_api/errors.h"

#include <exception>
#include <new>

#include "absl/strings/str_cat.h"

namespace memd::c_api {
namespace {

// Handed out when not even an error object could be allocated.
memd_error* OutOfMemoryError() noexcept {
  static memd_error error{MEMD_RESOURCE_EXHAUSTED,
                          "libmemd: out of memory (and no memory left for the error)"};
  return &error;
}

}  // namespace

memd_code Report(const absl::Status& status, memd_error** error) noexcept {
  const auto code = static_cast<memd_code>(status.code());
  if (status.ok() || error == nullptr) return code;
  try {
    *error = new memd_error{code, std::string(status.message())};
  } catch (...) {
    *error = OutOfMemoryError();
  }
  return code;
}

absl::Status StatusOfCurrentException() noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("libmemd: out of memory");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("libmemd: unexpected exception: ", e.what()));
  } catch (...) {
    return absl::InternalError("libmemd: unexpected exception of an unknown type");
  }
}

absl::Status Required(const void* pointer, const char* what) {
  if (pointer != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " is NULL"));
}

}  // namespace memd::c_api

using memd::c_api::OutOfMemoryError;

extern "C" {

memd_code memd_error_code(const memd_error* error) {
  return error == nullptr ? MEMD_OK : error->code;
}

const char* memd_error_message(const memd_error* error) {
  return error == nullptr ? "" : error->message.c_str();
}

void memd_error_free(memd_error* error) {
  if (error != OutOfMemoryError()) delete error;
}

const char* memd_code_name(memd_code code) {
  static constexpr const char* kNames[] = {
      "OK",        "CANCELLED",          "UNKNOWN",           "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND",  "ALREADY_EXISTS",    "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",      "UNAVAILABLE",       "DATA_LOSS",
      "UNAUTHENTICATED"};
  const auto index = static_cast<long>(code);
  if (index < 0 || index >= static_cast<long>(std::size(kNames))) return "UNKNOWN_CODE";
  return kNames[index];
}

}  // extern "C"
