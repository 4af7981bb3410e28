#include "client/python/src/buffer_protocol.h"

#include <exception>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/python/src/buffer.h"

namespace memd::python {
namespace {

// Marks a Py_buffer as a writable view (view->internal), for the release.
char kWritableView;

// A C slot: nothing may be thrown out of it, every failure is a Python
// error and -1.
int GetBuffer(PyObject* exporter, Py_buffer* view, int flags) {
  view->obj = nullptr;
  try {
    PyBuffer& buffer = py::handle(exporter).cast<PyBuffer&>();
    if (buffer.released()) {
      PyErr_Format(PyExc_ValueError, "buffer '%s' is released", buffer.name().c_str());
      return -1;
    }
    if (buffer.is_device()) {
      PyErr_Format(PyExc_BufferError,
                   "buffer '%s' is GPU memory (%s): it has no host bytes for the buffer "
                   "protocol; use DLPack (torch.from_dlpack(buf)) or "
                   "__cuda_array_interface__",
                   buffer.name().c_str(), buffer.info().location.c_str());
      return -1;
    }
    const bool readonly = buffer.exports_readonly();
    if (readonly && (flags & PyBUF_WRITABLE) != 0) {
      PyErr_Format(PyExc_BufferError, "buffer '%s' is read-only here (%s)",
                   buffer.name().c_str(),
                   buffer.writable() ? "sealed: its contents are final" : "a read lease");
      return -1;
    }
    if (PyBuffer_FillInfo(view, exporter, buffer.host_data(),
                          static_cast<Py_ssize_t>(buffer.size()), readonly ? 1 : 0,
                          flags) != 0) {
      return -1;
    }
    view->internal = readonly ? nullptr : &kWritableView;
    buffer.BeginView(!readonly);
    return 0;
  } catch (py::error_already_set& error) {
    error.restore();
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_BufferError, error.what());
  } catch (...) {
    PyErr_SetString(PyExc_BufferError, "memd: unknown error exporting a buffer");
  }
  if (view->obj != nullptr) {
    Py_CLEAR(view->obj);
  }
  return -1;
}

void ReleaseBuffer(PyObject* exporter, Py_buffer* view) {
  // Runs wherever a view dies, maybe while an exception propagates: keep it.
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  try {
    PyBuffer& buffer = py::handle(exporter).cast<PyBuffer&>();
    buffer.EndView(view->internal == &kWritableView);
  } catch (...) {
    // Not ours, which cannot be: nothing to count.
  }
  PyErr_Restore(type, value, traceback);
}

}  // namespace

void InstallBufferProtocol(PyHeapTypeObject* heap_type) {
  heap_type->ht_type.tp_as_buffer = &heap_type->as_buffer;
  heap_type->as_buffer.bf_getbuffer = GetBuffer;
  heap_type->as_buffer.bf_releasebuffer = ReleaseBuffer;
}

}  // namespace memd::python
