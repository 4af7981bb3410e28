#pragma once

// The pieces of the _memd module, one per file, and what they share.

#include <pybind11/pybind11.h>

#include "absl/time/time.h"

namespace memd::python {

namespace py = pybind11;

void BindBuffer(py::module_& module);
void BindTransfer(py::module_& module);
void BindClient(py::module_& module);

// Seconds (a finite, non-negative number) as a Duration; ValueError naming
// `what` otherwise.
absl::Duration SecondsArgument(const py::object& seconds, const char* what);

}  // namespace memd::python
