/* memd._native: the two things the memd package cannot do in pure Python on
 * every CPython >= 3.9, written against the stable ABI (one binary,
 * `_native.abi3.so`, for every version; it links no libpython):
 *
 *   Exportable  a base class whose instances export the buffer protocol
 *               (memoryview(buf), np.asarray(buf)) by asking the instance:
 *               `_get_view(writable) -> (address, size, readonly)` when a
 *               view is taken and `_release_view(writable)` when it is let
 *               go, so that memd.Buffer counts its live views in Python.
 *               (Python's own __buffer__ exists only from 3.12.)
 *   dlpack(...) a DLPack capsule, legacy "dltensor" or DLPack 1.0
 *               "dltensor_versioned" (with the read-only flag), over memory
 *               an owner object keeps alive; the tensor's deleter, from any
 *               thread, calls `owner._release_view(writable)` with the GIL
 *               held. A capsule no consumer took lets go in its destructor.
 *
 * It never calls libmemd: memd/_capi.py binds that with ctypes. Nothing here
 * knows what a memd buffer is beyond an address, a size and an owner.
 *
 * The buffer protocol's struct and slots entered the limited API in 3.11;
 * their layout and slot numbers are those of every CPython since 3.3 (the
 * stable ABI froze what already was), so for 3.9 and 3.10 this file declares
 * them itself exactly as 3.11's pybuffer.h and typeslots.h do. */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dlpack/dlpack.h> /* DLTensor (0.6 on Debian 12: the 1.0 structs below) */

#if !defined(Py_bf_getbuffer)
#define Py_bf_getbuffer 1
#define Py_bf_releasebuffer 2
#endif
#if !defined(PyBUF_WRITABLE)
typedef struct {
  void* buf;
  PyObject* obj;
  Py_ssize_t len;
  Py_ssize_t itemsize;
  int readonly;
  int ndim;
  char* format;
  Py_ssize_t* shape;
  Py_ssize_t* strides;
  Py_ssize_t* suboffsets;
  void* internal;
} Py_buffer;
PyAPI_FUNC(int) PyBuffer_FillInfo(Py_buffer* view, PyObject* o, void* buf, Py_ssize_t len,
                                  int readonly, int flags);
#define PyBUF_WRITABLE 0x0001
#endif

/* ---- DLPack 1.0 (dmlc/dlpack v1.0 include/dlpack/dlpack.h), absent from 0.6 ---- */

#ifndef DLPACK_FLAG_BITMASK_READ_ONLY
typedef struct {
  uint32_t major;
  uint32_t minor;
} memd_DLPackVersion;
typedef struct memd_DLManagedTensorVersioned {
  memd_DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct memd_DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} memd_DLManagedTensorVersioned;
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#else
typedef DLManagedTensorVersioned memd_DLManagedTensorVersioned;
#endif

static const char kLegacyName[] = "dltensor";
static const char kVersionedName[] = "dltensor_versioned";
#define MEMD_MAX_DIMS 32

/* ---- Exportable ---- */

/* Marks a Py_buffer as a writable view (view->internal), for the release. */
static char kWritableView;

static int exportable_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  view->obj = NULL;
  const int want_writable = (flags & PyBUF_WRITABLE) != 0;
  PyObject* answer = PyObject_CallMethod(self, "_get_view", "i", want_writable);
  if (answer == NULL) return -1;
  unsigned long long address = 0;
  Py_ssize_t size = 0;
  int readonly = 0;
  if (!PyArg_ParseTuple(answer, "Knp", &address, &size, &readonly)) {
    Py_DECREF(answer);
    return -1;
  }
  Py_DECREF(answer);
  /* From here the instance counts a view: every way out lets it go. */
  if (PyBuffer_FillInfo(view, self, (void*)(uintptr_t)address, size, readonly, flags) != 0) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject* done = PyObject_CallMethod(self, "_release_view", "i", !readonly);
    Py_XDECREF(done);
    PyErr_Clear();
    PyErr_Restore(type, value, traceback);
    return -1;
  }
  view->internal = readonly ? NULL : &kWritableView;
  return 0;
}

static void exportable_releasebuffer(PyObject* self, Py_buffer* view) {
  /* Runs wherever a view dies, maybe while an exception propagates. */
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyObject* done =
      PyObject_CallMethod(self, "_release_view", "i", view->internal == &kWritableView);
  if (done == NULL) {
    PyErr_WriteUnraisable(self);
  } else {
    Py_DECREF(done);
  }
  PyErr_Restore(type, value, traceback);
}

static PyType_Slot exportable_slots[] = {
    {Py_bf_getbuffer, (void*)exportable_getbuffer},
    {Py_bf_releasebuffer, (void*)exportable_releasebuffer},
    {Py_tp_doc, (void*)"Base of memd.Buffer: the buffer protocol, asking the instance "
                       "_get_view(writable) and _release_view(writable)."},
    {0, NULL}
};

static PyType_Spec exportable_spec = {
    "memd._native.Exportable",
    0, /* basicsize: object's */
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    exportable_slots,
};

/* ---- DLPack ---- */

/* What a tensor holds beyond the memory: its shape and strides, and the
 * owner it is a view of. */
typedef struct {
  PyObject* owner; /* strong */
  int writable;
  int64_t shape[MEMD_MAX_DIMS];
  int64_t strides[MEMD_MAX_DIMS];
} ExportContext;

/* The consumer may call a deleter from any thread, with or without the GIL. */
static void let_go(ExportContext* context) {
  /* After the interpreter is gone there is nothing to count (exiting). */
  if (Py_IsInitialized()) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject* done = PyObject_CallMethod(context->owner, "_release_view", "i", context->writable);
    if (done == NULL) {
      PyErr_WriteUnraisable(context->owner);
    } else {
      Py_DECREF(done);
    }
    Py_DECREF(context->owner);
    PyErr_Restore(type, value, traceback);
    PyGILState_Release(gil);
  }
  free(context);
}

static void legacy_deleter(DLManagedTensor* self) {
  let_go((ExportContext*)self->manager_ctx);
  free(self);
}

static void versioned_deleter(memd_DLManagedTensorVersioned* self) {
  let_go((ExportContext*)self->manager_ctx);
  free(self);
}

/* A consumer that took the tensor renamed the capsule (used_...) and owns
 * the deleter call; an untaken one is ours to let go. */
static void legacy_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kLegacyName)) return;
  DLManagedTensor* managed = (DLManagedTensor*)PyCapsule_GetPointer(capsule, kLegacyName);
  if (managed != NULL && managed->deleter != NULL) managed->deleter(managed);
}

static void versioned_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kVersionedName)) return;
  memd_DLManagedTensorVersioned* managed =
      (memd_DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, kVersionedName);
  if (managed != NULL && managed->deleter != NULL) managed->deleter(managed);
}

static void fill_tensor(DLTensor* tensor, ExportContext* context, unsigned long long address,
                        int device_type, int device_id, int code, int bits, int ndim) {
  tensor->data = (void*)(uintptr_t)address;
  tensor->device.device_type = (DLDeviceType)device_type;
  tensor->device.device_id = device_id;
  tensor->ndim = ndim;
  tensor->dtype.code = (uint8_t)code;
  tensor->dtype.bits = (uint8_t)bits;
  tensor->dtype.lanes = 1;
  tensor->shape = ndim > 0 ? context->shape : NULL;
  tensor->strides = ndim > 0 ? context->strides : NULL;
  tensor->byte_offset = 0;
}

PyDoc_STRVAR(dlpack_doc,
             "dlpack(owner, address, device_type, device_id, code, bits, shape, readonly, "
             "versioned) -> capsule\n\n"
             "A DLPack capsule over `address` (C-contiguous `shape`). The caller has counted "
             "one view on `owner` (writable unless readonly); the tensor's deleter calls "
             "owner._release_view(writable), also when this call fails.");

static PyObject* dlpack(PyObject* module, PyObject* args) {
  (void)module;
  PyObject* owner = NULL;
  unsigned long long address = 0;
  int device_type = 0, device_id = 0, code = 0, bits = 0, readonly = 0, versioned = 0;
  PyObject* shape = NULL;
  if (!PyArg_ParseTuple(args, "OKiiiiOpp", &owner, &address, &device_type, &device_id, &code,
                        &bits, &shape, &readonly, &versioned)) {
    return NULL;
  }
  ExportContext* context = (ExportContext*)calloc(1, sizeof(ExportContext));
  if (context == NULL) return PyErr_NoMemory();
  Py_INCREF(owner);
  context->owner = owner;
  context->writable = !readonly;
  /* From here the context holds the view: let_go ends it on every path. */
  PyObject* dims = PySequence_Fast(shape, "shape must be a sequence of ints");
  Py_ssize_t ndim = dims == NULL ? -1 : PySequence_Size(dims);
  if (dims != NULL && (ndim < 0 || ndim > MEMD_MAX_DIMS)) {
    PyErr_Format(PyExc_ValueError, "shape has %zd dimensions; DLPack export takes 0 to %d",
                 ndim, MEMD_MAX_DIMS);
    ndim = -1;
  }
  for (Py_ssize_t i = 0; ndim > 0 && i < ndim; ++i) {
    PyObject* item = PySequence_GetItem(dims, i);
    long long value = item == NULL ? -1 : PyLong_AsLongLong(item);
    Py_XDECREF(item);
    if (PyErr_Occurred()) {
      ndim = -1;
      break;
    }
    context->shape[i] = value;
  }
  Py_XDECREF(dims);
  if (ndim < 0) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    let_go(context);
    PyErr_Restore(type, value, traceback);
    return NULL;
  }
  if (ndim > 0) context->strides[ndim - 1] = 1;
  for (Py_ssize_t i = ndim - 1; i > 0; --i) {
    context->strides[i - 1] = context->strides[i] * context->shape[i];
  }

  PyObject* capsule = NULL;
  if (versioned) {
    memd_DLManagedTensorVersioned* managed =
        (memd_DLManagedTensorVersioned*)calloc(1, sizeof(memd_DLManagedTensorVersioned));
    if (managed == NULL) {
      let_go(context);
      return PyErr_NoMemory();
    }
    managed->version.major = 1;
    managed->version.minor = 0;
    managed->flags = readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
    managed->manager_ctx = context;
    managed->deleter = versioned_deleter;
    fill_tensor(&managed->dl_tensor, context, address, device_type, device_id, code, bits,
                (int)ndim);
    capsule = PyCapsule_New(managed, kVersionedName, versioned_capsule_destructor);
    if (capsule == NULL) {
      PyObject *type, *value, *traceback;
      PyErr_Fetch(&type, &value, &traceback);
      managed->deleter(managed);
      PyErr_Restore(type, value, traceback);
    }
  } else {
    DLManagedTensor* managed = (DLManagedTensor*)calloc(1, sizeof(DLManagedTensor));
    if (managed == NULL) {
      let_go(context);
      return PyErr_NoMemory();
    }
    managed->manager_ctx = context;
    managed->deleter = legacy_deleter;
    fill_tensor(&managed->dl_tensor, context, address, device_type, device_id, code, bits,
                (int)ndim);
    capsule = PyCapsule_New(managed, kLegacyName, legacy_capsule_destructor);
    if (capsule == NULL) {
      PyObject *type, *value, *traceback;
      PyErr_Fetch(&type, &value, &traceback);
      managed->deleter(managed);
      PyErr_Restore(type, value, traceback);
    }
  }
  return capsule;
}

/* ---- The module ---- */

static PyMethodDef native_methods[] = {
    {"dlpack", dlpack, METH_VARARGS, dlpack_doc},
    {NULL, NULL, 0, NULL},
};

static int native_exec(PyObject* module) {
  PyObject* type = PyType_FromSpec(&exportable_spec);
  if (type == NULL) return -1;
  if (PyModule_AddObject(module, "Exportable", type) != 0) {
    Py_DECREF(type);
    return -1;
  }
  return 0;
}

static PyModuleDef_Slot native_module_slots[] = {
    {Py_mod_exec, (void*)native_exec},
    {0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    "memd._native",
    "The buffer protocol and DLPack capsules for memd.Buffer (stable ABI).",
    0,
    native_methods,
    native_module_slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModuleDef_Init(&native_module); }
