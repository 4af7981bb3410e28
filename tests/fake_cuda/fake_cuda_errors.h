#pragma once

// memd FAKE CUDA driver (a test double): CUresult names and descriptions.

#include <cuda.h>

namespace memd::fake_cuda {

// "CUDA_ERROR_OUT_OF_MEMORY" for CUDA_ERROR_OUT_OF_MEMORY; nullptr for a code
// cuda.h does not define.
const char* ErrorName(CUresult code);

// A short description ("out of memory"); nullptr for an unknown code.
const char* ErrorDescription(CUresult code);

}  // namespace memd::fake_cuda
