/* memd._native: the two things the memd package cannot do in pure Python on
 * every CPython >= 3.9, written against the stable ABI (one binary,
 * `_native.abi3.so`, for every version; it links no libpython):
 *
 *   Exportable     a base class whose instances export the buffer protocol
 *                  (memoryview(buf), np.asarray(buf)) by asking the
 *                  instance: `_get_view(writable) -> (address, size,
 *                  readonly)` when a view is taken and
 *                  `_release_view(writable)` when it is let go, so that
 *                  memd.Buffer counts its live views in Python. (Python's
 *                  own __buffer__ exists only from 3.12.)
 *   view_context   DLPack's half: libmemd makes the tensor
 *   drop_context   (memd_buffer_to_dlpack{,_versioned}, called through
 *   capsule        ctypes); this module gives it a deleter hook that calls
 *                  `owner._release_view(writable)` with the GIL held, from
 *                  whatever thread the consumer lets the tensor go on, and
 *                  wraps the tensor in a "dltensor" or "dltensor_versioned"
 *                  capsule whose destructor lets an untaken tensor go.
 *
 * It never calls libmemd: memd/_capi.py binds that with ctypes, and hands
 * this module only addresses. memd.h is included for the DLPack 1.0 struct
 * it declares (Debian 12's dlpack.h is 0.6), not for its functions.
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

#include "memd/memd.h" /* DLManagedTensor, memd_DLManagedTensorVersioned */

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

static const char kLegacyName[] = "dltensor";
static const char kVersionedName[] = "dltensor_versioned";

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

/* A view the tensor's deleter ends: whose, and whether writable. */
typedef struct {
  PyObject* owner; /* strong */
  int writable;
} ViewContext;

/* memd_dlpack_options.on_delete. The consumer may call a deleter from any
 * thread, with or without the GIL. */
static void let_go(void* opaque) {
  ViewContext* context = (ViewContext*)opaque;
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

PyDoc_STRVAR(view_context_doc,
             "view_context(owner, writable) -> (on_delete, context)\n\n"
             "A view the caller has counted on `owner`, for memd_dlpack_options: on_delete "
             "is the address of a C function that, given `context`, calls "
             "owner._release_view(writable) with the GIL and frees the context. Pass both "
             "to the export; if it fails, drop_context(context).");

static PyObject* view_context(PyObject* module, PyObject* args) {
  (void)module;
  PyObject* owner = NULL;
  int writable = 0;
  if (!PyArg_ParseTuple(args, "Op", &owner, &writable)) return NULL;
  ViewContext* context = (ViewContext*)calloc(1, sizeof(ViewContext));
  if (context == NULL) return PyErr_NoMemory();
  Py_INCREF(owner);
  context->owner = owner;
  context->writable = writable;
  PyObject* answer = Py_BuildValue("(KK)", (unsigned long long)(uintptr_t)let_go,
                                   (unsigned long long)(uintptr_t)context);
  if (answer == NULL) {
    Py_DECREF(owner);
    free(context);
  }
  return answer;
}

PyDoc_STRVAR(drop_context_doc,
             "drop_context(context)\n\n"
             "Ends the view of a context no tensor took (its export failed), as its hook "
             "would have.");

static PyObject* drop_context(PyObject* module, PyObject* args) {
  (void)module;
  unsigned long long address = 0;
  if (!PyArg_ParseTuple(args, "K", &address)) return NULL;
  if (address == 0) {
    PyErr_SetString(PyExc_ValueError, "context is NULL");
    return NULL;
  }
  let_go((void*)(uintptr_t)address);
  if (PyErr_Occurred()) return NULL;
  Py_RETURN_NONE;
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

PyDoc_STRVAR(capsule_doc,
             "capsule(tensor, versioned) -> capsule\n\n"
             "A \"dltensor_versioned\" (versioned) or \"dltensor\" capsule around the "
             "address of a memd_DLManagedTensorVersioned or DLManagedTensor. The capsule "
             "owns the tensor: its destructor calls the tensor's deleter unless a consumer "
             "renamed it, and so does this call when it fails.");

static PyObject* capsule(PyObject* module, PyObject* args) {
  (void)module;
  unsigned long long address = 0;
  int versioned = 0;
  if (!PyArg_ParseTuple(args, "Kp", &address, &versioned)) return NULL;
  if (address == 0) {
    PyErr_SetString(PyExc_ValueError, "tensor is NULL");
    return NULL;
  }
  void* tensor = (void*)(uintptr_t)address;
  PyObject* made =
      versioned ? PyCapsule_New(tensor, kVersionedName, versioned_capsule_destructor)
                : PyCapsule_New(tensor, kLegacyName, legacy_capsule_destructor);
  if (made == NULL) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (versioned) {
      memd_DLManagedTensorVersioned* managed = (memd_DLManagedTensorVersioned*)tensor;
      managed->deleter(managed);
    } else {
      DLManagedTensor* managed = (DLManagedTensor*)tensor;
      managed->deleter(managed);
    }
    PyErr_Restore(type, value, traceback);
  }
  return made;
}

/* ---- The module ---- */

static PyMethodDef native_methods[] = {
    {"view_context", view_context, METH_VARARGS, view_context_doc},
    {"drop_context", drop_context, METH_VARARGS, drop_context_doc},
    {"capsule", capsule, METH_VARARGS, capsule_doc},
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
    "The buffer protocol, and DLPack capsules around libmemd's tensors, for memd.Buffer "
    "(stable ABI).",
    0,
    native_methods,
    native_module_slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModuleDef_Init(&native_module); }
