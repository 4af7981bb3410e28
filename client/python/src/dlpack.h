#pragma once

// DLPack export of memd buffers (__dlpack__, __dlpack_device__).
//
// What a consumer receives: a capsule over the buffer's own memory (never a
// copy), kDLCPU for host buffers and kDLCUDA with this process's ordinal for
// device buffers, dtype and shape from the buffer's attributes (or uint8,
// one dimension) with explicit row-major strides. Read-only memory (a read
// lease, or a sealed buffer) is exported only as a versioned capsule with
// DLPACK_FLAG_BITMASK_READ_ONLY: a legacy capsule cannot say "read-only",
// and consumers of legacy capsules (torch 1.13) hand out writable tensors.
// Each export counts as a view of the Buffer and holds a reference to it, so
// the mapping lives until the consumer calls the deleter (from any thread;
// the deleter takes the GIL).

#include <pybind11/pybind11.h>

namespace memd::python {

namespace py = pybind11;

class PyBuffer;

// (device_type, device_id).
py::tuple DlpackDevice(const PyBuffer& buffer);

// The capsule for `self` (a memd.Buffer). `dtype`/`shape`: None for the
// attributes' (memd._layout.resolve). Errors: BufferError for what cannot
// be exported (copy=True, another device, a stream for host memory, a
// legacy capsule of read-only memory), ValueError for bad attributes or a
// released buffer.
py::capsule ExportDlpack(py::object self, py::object stream, py::object max_version,
                         py::object dl_device, py::object copy, py::object dtype,
                         py::object shape);

}  // namespace memd::python
