#include "client/python/src/dlpack.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/python/src/buffer.h"
#include "client/python/src/dlpack_versioned.h"
#include "client/python/src/records.h"

namespace memd::python {
namespace {

// What a capsule's tensor needs beyond the mapping: the shape and strides
// it points into, and the Buffer it is a view of.
struct ExportContext {
  PyObject* owner = nullptr;  // A strong reference to the memd.Buffer.
  PyBuffer* buffer = nullptr;
  bool writable = false;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

// The consumer's side of the exchange: it may call a deleter from any
// thread, with or without the GIL.
void LetGo(ExportContext* context) {
  // After the interpreter is gone there is nothing to count and no
  // reference to drop (the process is exiting).
  if (Py_IsInitialized()) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    context->buffer->EndView(context->writable);
    Py_DECREF(context->owner);
    PyErr_Restore(type, value, traceback);
    PyGILState_Release(gil);
  }
  delete context;
}

template <typename Managed>
void Deleter(Managed* self) {
  LetGo(static_cast<ExportContext*>(self->manager_ctx));
  delete self;
}

// The capsule's own destructor: a consumer that took the tensor renamed the
// capsule (used_dltensor...) and owns the deleter call; an untaken one is
// ours to let go.
template <typename Managed, const char* kName>
void CapsuleDestructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kName)) return;
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, kName));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

std::pair<int, int> Pair(const py::object& value, const char* what) {
  if (!py::isinstance<py::tuple>(value) || py::len(value) != 2) {
    throw py::type_error(absl::StrCat(what, " must be a tuple of two ints"));
  }
  py::tuple tuple = value.cast<py::tuple>();
  return {tuple[0].cast<int>(), tuple[1].cast<int>()};
}

template <typename Managed>
void Fill(Managed* managed, ExportContext* context, void* data, DLDevice device,
          DLDataType dtype) {
  managed->manager_ctx = context;
  managed->deleter = &Deleter<Managed>;
  DLTensor& tensor = managed->dl_tensor;
  tensor.data = data;
  tensor.device = device;
  tensor.ndim = static_cast<int>(context->shape.size());
  tensor.dtype = dtype;
  tensor.shape = context->shape.empty() ? nullptr : context->shape.data();
  tensor.strides = context->strides.empty() ? nullptr : context->strides.data();
  tensor.byte_offset = 0;
}

}  // namespace

py::tuple DlpackDevice(const PyBuffer& buffer) {
  if (buffer.is_level_zero()) return py::make_tuple(kDLOneAPIDevice, buffer.device());
  if (buffer.is_device()) return py::make_tuple(static_cast<int>(kDLCUDA), buffer.device());
  return py::make_tuple(static_cast<int>(kDLCPU), 0);
}

py::capsule ExportDlpack(py::object self, py::object stream, py::object max_version,
                         py::object dl_device, py::object copy, py::object dtype,
                         py::object shape) {
  PyBuffer& buffer = self.cast<PyBuffer&>();
  buffer.CheckUsable();
  const std::string& name = buffer.name();
  if (!copy.is_none() && py::bool_(copy)) {
    throw py::buffer_error(absl::StrCat(
        "buffer '", name, "': memd exports its shared memory itself and never a copy "
        "(copy=True); copy on the consumer's side"));
  }
  const py::tuple own = DlpackDevice(buffer);
  const std::pair<int, int> own_pair{own[0].cast<int>(), own[1].cast<int>()};
  if (!dl_device.is_none() && Pair(dl_device, "dl_device") != own_pair) {
    throw py::buffer_error(absl::StrCat(
        "buffer '", name, "' lives on DLPack device (", own_pair.first, ", ", own_pair.second,
        "); exporting to ", py::str(dl_device).cast<std::string>(), " would need a copy"));
  }
  // Host memory has no stream. A CUDA consumer's stream needs no wait:
  // memd's memory has no work pending on any stream of this process (the
  // daemon's copies are done when their Transfer.wait() returns).
  if (!buffer.is_device() && !stream.is_none()) {
    throw py::buffer_error(absl::StrCat("buffer '", name,
                                        "' is host memory: stream must be None"));
  }
  bool versioned = false;
  if (!max_version.is_none()) versioned = Pair(max_version, "max_version").first >= 1;
  const bool readonly = buffer.exports_readonly();
  if (readonly && !versioned) {
    throw py::buffer_error(absl::StrCat(
        "buffer '", name, "' is read-only (",
        buffer.writable() ? "sealed" : "a read lease",
        "), and a legacy DLPack capsule cannot say so: its consumer could write "
        "through it. Use np.asarray(buf), memoryview(buf) or buf.numpy(), or pass "
        "max_version=(1, 0) for a read-only versioned capsule"));
  }

  py::object layout = py::module_::import("memd._layout")
                          .attr("resolve")(AttrsDict(buffer.info().attrs), buffer.size(),
                                           dtype, shape);
  py::object layout_dtype = layout.attr("dtype");
  const DLDataType dl_dtype{layout_dtype.attr("dl_code").cast<std::uint8_t>(),
                            layout_dtype.attr("bits").cast<std::uint8_t>(), 1};

  auto* context = new ExportContext;
  for (py::handle dim : layout.attr("shape")) context->shape.push_back(dim.cast<std::int64_t>());
  context->strides.assign(context->shape.size(), 1);
  for (std::size_t i = context->shape.size(); i-- > 1;) {
    context->strides[i - 1] = context->strides[i] * context->shape[i];
  }
  context->owner = self.ptr();
  context->buffer = &buffer;
  context->writable = !readonly;

  const DLDevice device{static_cast<DLDeviceType>(own_pair.first), own_pair.second};
  void* data = buffer.is_device() ? reinterpret_cast<void*>(buffer.device_pointer())
                                  : static_cast<void*>(buffer.host_data());
  // From here the context holds a view and a reference; the deleter lets
  // both go, also when the capsule cannot be made.
  Py_INCREF(context->owner);
  buffer.BeginView(context->writable);
  PyObject* capsule = nullptr;
  if (versioned) {
    auto* managed = new DLManagedTensorVersioned{};
    managed->version = {1, 0};
    managed->flags = readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
    Fill(managed, context, data, device, dl_dtype);
    capsule = PyCapsule_New(managed, kVersionedCapsuleName,
                            &CapsuleDestructor<DLManagedTensorVersioned, kVersionedCapsuleName>);
    if (capsule == nullptr) managed->deleter(managed);
  } else {
    auto* managed = new DLManagedTensor{};
    Fill(managed, context, data, device, dl_dtype);
    capsule = PyCapsule_New(managed, kLegacyCapsuleName,
                            &CapsuleDestructor<DLManagedTensor, kLegacyCapsuleName>);
    if (capsule == nullptr) managed->deleter(managed);
  }
  if (capsule == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::capsule>(capsule);
}

}  // namespace memd::python
