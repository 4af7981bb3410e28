// memd._memd: the C++ half of the memd Python package (memd/__init__.py
// re-exports it). It binds libmemd's public API (memd/client.h) and links
// libmemd.so, never the static client: one process, one copy of libmemd's
// internals (client/CMakeLists.txt says why).

#include <pybind11/pybind11.h>

#include "client/python/src/bindings.h"
#include "client/python/src/errors.h"

PYBIND11_MODULE(_memd, module) {
  module.doc() = "libmemd bindings; use the memd package, not this module.";
  memd::python::RegisterErrors(module);
  memd::python::BindTransfer(module);
  memd::python::BindBuffer(module);
  memd::python::BindClient(module);
}
