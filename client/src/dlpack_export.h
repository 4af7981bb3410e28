#pragma once

// The one DLPack exporter of libmemd: a buffer's memory as a DLPack tensor,
// 0.6 (DLManagedTensor) or 1.0 (memd_DLManagedTensorVersioned, which can say
// read-only). The C API's memd_buffer_to_dlpack{,_versioned} call it, and
// every binding goes through those: the Python package's Buffer.__dlpack__
// calls them with ctypes and only wraps the tensor in a capsule.

#include <memory>

#include "absl/status/statusor.h"
#include "memd/client.h"
#include "memd/memd.h"

namespace memd::internal {

// DLPack's kDLOneAPI (Level Zero / SYCL devices), from DLPack 0.7 on;
// Debian's 0.6 header lacks it.
inline constexpr int kDLOneAPIDevice = 14;

// A tensor over `lease`'s memory (host: kDLCPU; device: kDLCUDA and this
// process's ordinal, or kDLOneAPI and this process's Level Zero device
// index), row-major with explicit strides, shaped by `options` (read
// already: struct_size is the library's). The tensor holds the lease until
// its deleter runs; the deleter then lets the lease go and calls
// options.on_delete(options.on_delete_context), once, on its own thread. A
// failed export calls nothing.
//
// Read-only: a read-only lease or options.read_only. The versioned tensor
// says so (DLPACK_FLAG_BITMASK_READ_ONLY); the 0.6 one cannot, and is
// refused unless options.allow_read_only.
//
// INVALID_ARGUMENT for a dtype of partial bytes or no lanes, ndim out of
// 0..32, a NULL shape, a negative dimension, more bytes than the buffer has
// (the numbers); FAILED_PRECONDITION for a released buffer, and (0.6) a
// read-only export without allow_read_only.
absl::StatusOr<DLManagedTensor*> ExportDlpack(std::shared_ptr<Buffer> lease,
                                              const memd_dlpack_options& options);
absl::StatusOr<memd_DLManagedTensorVersioned*> ExportDlpackVersioned(
    std::shared_ptr<Buffer> lease, const memd_dlpack_options& options);

}  // namespace memd::internal
