#pragma once

// absl::Status -> memd's Python exceptions (memd/_errors.py: one class per
// status code, each also a fitting builtin: NotFoundError is a
// FileNotFoundError).
//
// Code that runs with the GIL released cannot build Python objects, so it
// throws StatusError; the translator RegisterErrors installs turns that into
// the Python exception once the GIL is back.

#include <exception>
#include <string>
#include <utility>

#include <pybind11/pybind11.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace memd::python {

namespace py = pybind11;

/// A non-OK status on its way to Python. Immutable.
class StatusError : public std::exception {
 public:
  explicit StatusError(absl::Status status)
      : status_(std::move(status)), what_(status_.ToString()) {}
  const absl::Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  absl::Status status_;
  std::string what_;
};

inline void Check(const absl::Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T Take(absl::StatusOr<T>&& value) {
  if (!value.ok()) throw StatusError(value.status());
  return std::move(*value);
}

// The memd.Error instance for a non-OK status (GIL held).
py::object ToPythonError(const absl::Status& status);

// Imports memd._errors (failing the module's import if it is missing) and
// registers the StatusError translator.
void RegisterErrors(py::module_& module);

}  // namespace memd::python
