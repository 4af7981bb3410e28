// memd.Buffer's Python face. The array helpers (numpy, torch), pickling and
// the __cuda_array_interface__ layout live in memd/_arrays.py and
// memd/_pickle.py; this file forwards to them so that help(memd.Buffer)
// shows one class.

#include "absl/strings/str_cat.h"
#include "client/python/src/bindings.h"
#include "client/python/src/buffer.h"
#include "client/python/src/buffer_protocol.h"
#include "client/python/src/dlpack.h"
#include "client/python/src/records.h"

namespace memd::python {
namespace {

py::object Helper(const char* module, const char* name) {
  return py::module_::import(module).attr(name);
}

py::dict CudaArrayInterface(py::object self) {
  PyBuffer& buffer = self.cast<PyBuffer&>();
  if (!buffer.is_device()) {
    // AttributeError, so that hasattr() is False for host memory.
    throw py::attribute_error(absl::StrCat(
        "buffer '", buffer.name(), "' is host memory: it has no __cuda_array_interface__ "
        "(use the buffer protocol or DLPack)"));
  }
  if (buffer.is_level_zero()) {
    throw py::attribute_error(absl::StrCat(
        "buffer '", buffer.name(), "' is Level Zero GPU memory: it has no "
        "__cuda_array_interface__ (use DLPack: kDLOneAPI)"));
  }
  buffer.CheckUsable();
  py::object layout = Helper("memd._layout", "resolve")(AttrsDict(buffer.info().attrs),
                                                       buffer.size());
  py::object typestr = layout.attr("dtype").attr("typestr");
  if (typestr.is_none()) {
    throw py::value_error(absl::StrCat(
        "buffer '", buffer.name(), "': dtype ",
        py::str(layout.attr("dtype").attr("name")).cast<std::string>(),
        " has no __cuda_array_interface__ typestr; use DLPack"));
  }
  py::dict interface;
  interface["shape"] = layout.attr("shape");
  interface["typestr"] = typestr;
  interface["data"] = py::make_tuple(py::int_(buffer.device_pointer()),
                                     py::bool_(buffer.exports_readonly()));
  interface["version"] = 3;
  interface["strides"] = py::none();  // C-contiguous.
  // None: no synchronisation needed (memd memory has no pending work on a
  // stream of this process).
  interface["stream"] = py::none();
  return interface;
}

std::string Repr(const PyBuffer& buffer) {
  return absl::StrCat("<memd.Buffer '", buffer.name(), "' ", buffer.size(), " bytes ",
                      buffer.info().location, buffer.writable() ? " read-write" : " read-only",
                      buffer.sealed() ? " sealed" : "", buffer.released() ? " released" : "",
                      ">");
}

// What the lease says: name, size, location, state, attributes, device.
void BindProperties(py::class_<PyBuffer>& buffer_class) {
  buffer_class
      .def_property_readonly("name", &PyBuffer::name)
      .def_property_readonly("size", &PyBuffer::size, "Bytes, as created.")
      .def_property_readonly(
          "location", [](const PyBuffer& b) { return b.info().location; },
          "\"host\", \"pinned\" or \"device:N\".")
      .def_property_readonly("writable", &PyBuffer::writable,
                             "Whether this is a read-write lease (from create, or "
                             "open(writable=True) of a buffer being written).")
      .def_property_readonly("readonly", &PyBuffer::exports_readonly,
                             "Whether views of it are read-only now: a read lease, or a "
                             "sealed buffer.")
      .def_property_readonly("sealed", &PyBuffer::sealed)
      .def_property_readonly("released", &PyBuffer::released)
      .def_property_readonly("created", &PyBuffer::created,
                             "open_or_create: whether this call created the buffer.")
      .def_property_readonly("lease_id", &PyBuffer::lease_id)
      .def_property_readonly(
          "attrs", [](const PyBuffer& b) { return AttrsDict(b.info().attrs); },
          "The attributes given at create (a new dict each time).")
      .def_property_readonly(
          "info", [](const PyBuffer& b) { return ToPython(b.info()); },
          "BufferInfo as of the call that granted the lease (or seal()); "
          "Client.stat() is fresh.")
      .def_property_readonly("device", &PyBuffer::device,
                             "This process's CUDA ordinal of a device buffer's GPU, -1 for "
                             "host memory.")
      .def_property_readonly("device_pointer", &PyBuffer::device_pointer,
                             "A device buffer's CUdeviceptr in this process, 0 for host "
                             "memory.");
}

// The bytes as arrays: DLPack, __cuda_array_interface__, numpy(), torch().
void BindExports(py::class_<PyBuffer>& buffer_class) {
  buffer_class
      .def("__dlpack_device__", &DlpackDevice,
           "(kDLCPU=1, 0) for host memory, (kDLCUDA=2, device) for CUDA GPU memory, "
           "(kDLOneAPI=14, device) for Level Zero GPU memory.")
      .def(
          "__dlpack__",
          [](py::object self, py::object stream, py::object max_version,
             py::object dl_device, py::object copy) {
            return ExportDlpack(std::move(self), std::move(stream), std::move(max_version),
                                std::move(dl_device), std::move(copy), py::none(),
                                py::none());
          },
          py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
          R"doc(The buffer as a DLPack capsule, zero-copy (array API python_spec).

Without max_version (numpy 1.24, torch 1.13): a legacy "dltensor" capsule,
refused with BufferError for read-only memory (a read lease or a sealed
buffer), which a legacy capsule cannot mark read-only. max_version >= (1, 0):
a "dltensor_versioned" capsule, with DLPACK_FLAG_BITMASK_READ_ONLY set for
read-only memory. dtype and shape come from the buffer's attributes (uint8,
one dimension, otherwise). copy=True and a dl_device other than
__dlpack_device__() raise BufferError (memd never copies). stream: None for
host memory; for GPU memory the consumer's stream is accepted and nothing is
synchronised, because memd memory has no work pending on this process's
streams (a daemon copy is complete once its Transfer.wait() returns).)doc")
      .def(
          "_dlpack",
          [](py::object self, py::object dtype, py::object shape, py::object max_version) {
            return ExportDlpack(std::move(self), py::none(), std::move(max_version),
                                py::none(), py::none(), std::move(dtype), std::move(shape));
          },
          py::arg("dtype") = py::none(), py::arg("shape") = py::none(),
          py::arg("max_version") = py::none(),
          "__dlpack__ with an explicit dtype and shape (memd._arrays).")
      .def_property_readonly("__cuda_array_interface__", &CudaArrayInterface,
                             "Device buffers only (AttributeError for host memory): "
                             "version 3, shape and typestr from the attributes, data "
                             "(pointer, readonly). It carries no owner: keep the Buffer "
                             "alive while the consumer uses it (DLPack is safer).")
      .def(
          "numpy",
          [](py::object self, py::object dtype, py::object shape) {
            return Helper("memd._arrays", "numpy")(self, dtype, shape);
          },
          py::arg("dtype") = py::none(), py::arg("shape") = py::none(),
          R"doc(A zero-copy numpy array over a host buffer.

dtype/shape default to the buffer's attributes ("dtype", "shape"), else
uint8 over every byte; an explicit dtype without a shape reads the whole
buffer in one dimension. ValueError when the shape needs more bytes than the
buffer has or the attributes are malformed. Read-only (not writeable) for
read-only memory. The array keeps a view, so the mapping outlives release().)doc")
      .def(
          "torch",
          [](py::object self, py::object dtype, py::object shape, bool copy) {
            return Helper("memd._arrays", "torch")(self, dtype, shape, copy);
          },
          py::arg("dtype") = py::none(), py::arg("shape") = py::none(), py::kw_only(),
          py::arg("copy") = false,
          R"doc(A torch tensor over the buffer (ImportError without torch).

Writable memory: zero-copy through DLPack. Read-only memory (a read lease or
a sealed buffer): BufferError, because torch has no read-only tensors and
would let you write to memory other processes trust; copy=True returns a
copy instead (host buffers only). dtype/shape as numpy().)doc");
}

}  // namespace

void BindBuffer(py::module_& module) {
  py::class_<PyBuffer> buffer_class(module, "Buffer",
                                    py::custom_type_setup(&InstallBufferProtocol),
                       R"doc(A lease on a named memd buffer, mapped into this process.

Made by Client.create / open / open_or_create (never directly). Use it as a
context manager, or call release(); a Buffer that is garbage-collected
releases its lease too.

Host buffers ("host", "pinned") support the buffer protocol, zero-copy:
memoryview(buf), np.asarray(buf), buf.numpy(). Views are read-only for a
read lease and once the buffer is sealed (its contents are final). Every
buffer supports DLPack (__dlpack__, __dlpack_device__); device buffers
("device:N") also __cuda_array_interface__ (v3).

release() with views alive (memoryviews, arrays made from the buffer,
DLPack exports) marks the Buffer released at once but keeps the lease and
the mapping until the last view dies: no view ever dangles. Beware
np.frombuffer(buf): numpy lets go of the view at once and keeps only the
Buffer object, so such an array is safe only while the Buffer is not
released; np.asarray(buf) and buf.numpy() keep their view.

Not for concurrent use from several threads without a lock, like
libmemd's Buffer (calls are safe, but their interleaving is yours to order).
Pickling a Buffer pickles its name: the unpickled object is a read-only
lease opened by name (see memd.reopen).)doc");
  BindProperties(buffer_class);
  BindExports(buffer_class);
  buffer_class
      .def("seal", &PyBuffer::Seal,
           "Makes the contents final and wakes waiting readers. BufferError while writable "
           "views (memoryviews, arrays, DLPack exports) are alive; FailedPreconditionError "
           "for a read lease or a second seal.")
      .def("release", &PyBuffer::Release,
           "Ends the lease; idempotent. With views alive, the lease and mapping end "
           "with the last view (the Buffer counts as released at once).")
      .def("close", &PyBuffer::Release, "The same as release().")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyBuffer& b, py::object, py::object, py::object) {
             b.Release();
             return false;
           })
      .def("__repr__", &Repr)
      .def("__reduce__",
           [](const PyBuffer& b) {
             return py::make_tuple(Helper("memd._pickle", "reopen"),
                                   py::make_tuple(b.name(), b.info().owner_uid));
           });;
}

}  // namespace memd::python
