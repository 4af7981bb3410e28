#pragma once

// memd_buffer_to_dlpack: a buffer's memory as a DLPack 0.6 tensor.

#include <memory>

#include "absl/status/statusor.h"
#include "client/src/c_api/handles.h"
#include "memd/memd.h"

namespace memd::c_api {

// DLPack's kDLOneAPI (Level Zero / SYCL devices), from DLPack 0.7 on;
// Debian's 0.6 header lacks it.
inline constexpr int kDLOneAPIDevice = 14;

// A DLManagedTensor over `lease`'s memory (host: kDLCPU; device: kDLCUDA
// and this process's ordinal, or kDLOneAPI and this process's Level Zero
// device index) that holds the lease until its deleter runs.
// INVALID_ARGUMENT for a dtype of partial bytes or no lanes, ndim out of
// 0..32, a negative dimension, more bytes than the buffer has (the
// numbers); FAILED_PRECONDITION for a read-only lease without
// allow_read_only, a released buffer.
absl::StatusOr<DLManagedTensor*> ExportDlpack(std::shared_ptr<Buffer> lease,
                                              const memd_dlpack_options& options);

}  // namespace memd::c_api
