#include "client/python/src/errors.h"

#include <string>

namespace memd::python {

py::object ToPythonError(const absl::Status& status) {
  // Imported per call (a sys.modules lookup): a py::object kept in a static
  // would be destroyed after the interpreter at exit.
  py::object make = py::module_::import("memd._errors").attr("error_for_code");
  return make(static_cast<int>(status.code()), std::string(status.message()));
}

void RegisterErrors(py::module_& module) {
  py::module_::import("memd._errors");
  py::register_exception_translator([](std::exception_ptr pointer) {
    try {
      if (pointer) std::rethrow_exception(pointer);
    } catch (const StatusError& error) {
      py::object exception = ToPythonError(error.status());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())),
                      exception.ptr());
    }
  });
}

}  // namespace memd::python
