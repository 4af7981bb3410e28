#pragma once

// DLPack 1.0's versioned structs, which Debian 12's dlpack.h (0.6) lacks.
// Laid out exactly as in dmlc/dlpack include/dlpack/dlpack.h v1.0
// (https://github.com/dmlc/dlpack/blob/v1.0/include/dlpack/dlpack.h, and the
// Python exchange rules in https://dmlc.github.io/dlpack/latest/python_spec.html):
// DLTensor did not change from 0.6, so the 0.6 header's is reused. Delete
// this file when the system header has DLManagedTensorVersioned.

#include <cstdint>

#include <dlpack/dlpack.h>

#ifdef DLPACK_MAJOR_VERSION
#error "dlpack.h >= 1.0 defines these: include it instead of dlpack_versioned.h"
#endif

namespace memd::python {

// The capsule names of the exchange (python_spec): a consumer renames the
// capsule it took to used_*.
inline constexpr char kLegacyCapsuleName[] = "dltensor";
inline constexpr char kVersionedCapsuleName[] = "dltensor_versioned";

// DLPack 0.8 added kDLBool = 6 to DLDataTypeCode.
inline constexpr std::uint8_t kDLBoolCode = 6;
// kDLOneAPI (Level Zero / SYCL devices), from DLPack 0.7 on.
inline constexpr int kDLOneAPIDevice = 14;

}  // namespace memd::python

extern "C" {

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

// The tensor is read-only: the consumer must not write through it.
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
// The producer made a copy the consumer owns (memd never does).
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

}  // extern "C"
