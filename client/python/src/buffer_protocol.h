#pragma once

#include <Python.h>

namespace memd::python {

// Gives memd.Buffer the buffer protocol through our own bf_getbuffer and
// bf_releasebuffer (pybind11's def_buffer has no release hook, so it could
// not count live views, and an exception thrown in its lambda aborts).
// Called from py::custom_type_setup, before PyType_Ready.
void InstallBufferProtocol(PyHeapTypeObject* heap_type);

}  // namespace memd::python
