// memd FAKE CUDA driver (a test double, not NVIDIA's driver): the names and
// descriptions cuGetErrorName / cuGetErrorString hand out. Every CUresult of
// the CUDA 13.0 cuda.h is listed, so a code injected with
// MEMD_FAKE_CUDA_INIT_ERROR has a name too; descriptions follow the real
// driver's wording where it is well known, else cuda.h's doc comment.

#include "tests/fake_cuda/fake_cuda_errors.h"

namespace memd::fake_cuda {
namespace {

struct ErrorText {
  CUresult code;
  const char* name;
  const char* description;
};

#define MEMD_FAKE_ERROR(code, description) {code, #code, description},
constexpr ErrorText kErrors[] = {
    MEMD_FAKE_ERROR(CUDA_SUCCESS, "no error")
    MEMD_FAKE_ERROR(CUDA_ERROR_INVALID_VALUE, "invalid argument")
    MEMD_FAKE_ERROR(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")
    MEMD_FAKE_ERROR(CUDA_ERROR_NOT_INITIALIZED, "initialization error")
    MEMD_FAKE_ERROR(CUDA_ERROR_DEINITIALIZED, "driver shutting down")
    MEMD_FAKE_ERROR(CUDA_ERROR_PROFILER_DISABLED, "profiler is not initialized for this run")
    MEMD_FAKE_ERROR(CUDA_ERROR_PROFILER_NOT_INITIALIZED, "profiler not initialized (deprecated)")
    MEMD_FAKE_ERROR(CUDA_ERROR_PROFILER_ALREADY_STARTED, "profiler already started (deprecated)")
    MEMD_FAKE_ERROR(CUDA_ERROR_PROFILER_ALREADY_STOPPED, "profiler already stopped (deprecated)")
    MEMD_FAKE_ERROR(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library")
    MEMD_FAKE_ERROR(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER,
                    "the API call requires a newer CUDA driver")
    MEMD_FAKE_ERROR(CUDA_ERROR_DEVICE_UNAVAILABLE,
                    "the requested CUDA device is unavailable at the current time")
    MEMD_FAKE_ERROR(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")
    MEMD_FAKE_ERROR(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")
    MEMD_FAKE_ERROR(CUDA_ERROR_DEVICE_NOT_LICENSED, "the Grid license is not applied")
    MEMD_FAKE_ERROR(CUDA_ERROR_INVALID_IMAGE, "the device kernel image is invalid")
    MEMD_FAKE_ERROR(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")
    MEMD_FAKE_ERROR(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "the context is already the active context")
    MEMD_FAKE_ERROR(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed")
    MEMD_FAKE_ERROR(CUDA_ERROR_UNMAP_FAILED, "unmapping of buffer object failed")
    MEMD_FAKE_ERROR(CUDA_ERROR_ARRAY_IS_MAPPED, "the array is mapped and cannot be destroyed")
    MEMD_FAKE_ERROR(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped")
    MEMD_FAKE_ERROR(CUDA_ERROR_NO_BINARY_FOR_GPU,
                    "no kernel image is available for execution on the device")
    MEMD_FAKE_ERROR(CUDA_ERROR_ALREADY_ACQUIRED, "a resource has already been acquired")
    MEMD_FAKE_ERROR(CUDA_ERROR_NOT_MAPPED, "resource not mapped")
    MEMD_FAKE_ERROR(CUDA_ERROR_NOT_MAPPED_AS_ARRAY,
                    "the mapped resource is not available for access as an array")
    MEMD_FAKE_ERROR(CUDA_ERROR_NOT_MAPPED_AS_POINTER,
                    "the mapped resource is not available for access as a pointer")
    MEMD_FAKE_ERROR(CUDA_ERROR_ECC_UNCORRECTABLE, "an uncorrectable ECC error was detected")
    MEMD_FAKE_ERROR(CUDA_ERROR_UNSUPPORTED_LIMIT, "the limit is not supported by the active device")
    MEMD_FAKE_ERROR(CUDA_ERROR_CONTEXT_ALREADY_IN_USE,
                    "the context is already bound to another CPU thread")
    MEMD_FAKE_ERROR(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
                    "peer access is not supported between these two devices")
    MEMD_FAKE_ERROR(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed")
    MEMD_FAKE_ERROR(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, "an error with OpenGL or DirectX context")
    MEMD_FAKE_ERROR(CUDA_ERROR_NVLINK_UNCORRECTABLE, "an uncorrectable NVLink error was detected")
    MEMD_FAKE_ERROR(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "the PTX JIT compiler library was not found")
    MEMD_FAKE_ERROR(CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
                    "the PTX was compiled with an unsupported toolchain")
    MEMD_FAKE_ERROR(CUDA_ERROR_JIT_COMPILATION_DISABLED, "the PTX JIT compilation was disabled")
    MEMD_FAKE_ERROR(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY,
                    "the execution affinity type is not supported by the device")
    MEMD_FAKE_ERROR(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC,
                    "the PTX calls cudaDeviceSynchronize, which is unsupported")
    MEMD_FAKE_ERROR(CUDA_ERROR_CONTAINED, "a device exception was contained by error containment")
    MEMD_FAKE_ERROR(CUDA_ERROR_INVALID_SOURCE, "the device kernel source is invalid")
    MEMD_FAKE_ERROR(CUDA_ERROR_FILE_NOT_FOUND, "the file specified was not found")
    MEMD_FAKE_ERROR(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND,
                    "a link to a shared object failed to resolve")
    MEMD_FAKE_ERROR(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED,
                    "initialization of a shared object failed")
    MEMD_FAKE_ERROR(CUDA_ERROR_OPERATING_SYSTEM,
                    "OS call failed or operation not supported on this OS")
    MEMD_FAKE_ERROR(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")
    MEMD_FAKE_ERROR(CUDA_ERROR_ILLEGAL_STATE,
                    "the operation cannot be performed in the present state")
    MEMD_FAKE_ERROR(CUDA_ERROR_LOSSY_QUERY,
                    "the query would discard semantically important information")
    MEMD_FAKE_ERROR(CUDA_ERROR_NOT_FOUND, "named symbol not found")
    MEMD_FAKE_ERROR(CUDA_ERROR_NOT_READY, "device not ready")
    MEMD_FAKE_ERROR(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")
    MEMD_FAKE_ERROR(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch")
    MEMD_FAKE_ERROR(CUDA_ERROR_LAUNCH_TIMEOUT, "the device kernel took too long to execute")
    MEMD_FAKE_ERROR(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING,
                    "the launch uses an incompatible texturing mode")
    MEMD_FAKE_ERROR(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled")
    MEMD_FAKE_ERROR(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled")
    MEMD_FAKE_ERROR(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "the primary context is already active")
    MEMD_FAKE_ERROR(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed")
    MEMD_FAKE_ERROR(CUDA_ERROR_ASSERT, "device-side assert triggered during kernel execution")
    MEMD_FAKE_ERROR(CUDA_ERROR_TOO_MANY_PEERS, "peer mapping resources exhausted")
    MEMD_FAKE_ERROR(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
                    "part or all of the requested memory range is already mapped")
    MEMD_FAKE_ERROR(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
                    "pointer does not correspond to a registered memory region")
    MEMD_FAKE_ERROR(CUDA_ERROR_HARDWARE_STACK_ERROR, "a kernel hit a hardware stack error")
    MEMD_FAKE_ERROR(CUDA_ERROR_ILLEGAL_INSTRUCTION, "a kernel executed an illegal instruction")
    MEMD_FAKE_ERROR(CUDA_ERROR_MISALIGNED_ADDRESS, "a kernel accessed a misaligned address")
    MEMD_FAKE_ERROR(CUDA_ERROR_INVALID_ADDRESS_SPACE,
                    "a kernel used an operation on the wrong address space")
    MEMD_FAKE_ERROR(CUDA_ERROR_INVALID_PC, "a kernel program counter wrapped its address space")
    MEMD_FAKE_ERROR(CUDA_ERROR_LAUNCH_FAILED,
                    "an exception occurred on the device while executing a kernel")
    MEMD_FAKE_ERROR(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
                    "too many blocks in a cooperative launch")
    MEMD_FAKE_ERROR(CUDA_ERROR_TENSOR_MEMORY_LEAK,
                    "a kernel exited without freeing its tensor memory")
    MEMD_FAKE_ERROR(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")
    MEMD_FAKE_ERROR(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")
    MEMD_FAKE_ERROR(CUDA_ERROR_SYSTEM_NOT_READY,
                    "the system is not yet ready to start any CUDA work")
    MEMD_FAKE_ERROR(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
                    "system has unsupported display driver / cuda driver combination")
    MEMD_FAKE_ERROR(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE,
                    "forward compatibility is not supported on this device")
    MEMD_FAKE_ERROR(CUDA_ERROR_MPS_CONNECTION_FAILED,
                    "the MPS client failed to connect to the MPS server")
    MEMD_FAKE_ERROR(CUDA_ERROR_MPS_RPC_FAILURE, "an RPC between the MPS server and client failed")
    MEMD_FAKE_ERROR(CUDA_ERROR_MPS_SERVER_NOT_READY, "the MPS server is not ready for new clients")
    MEMD_FAKE_ERROR(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED,
                    "the MPS server has no resources for another client")
    MEMD_FAKE_ERROR(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED,
                    "the MPS server has no resources for another device connection")
    MEMD_FAKE_ERROR(CUDA_ERROR_MPS_CLIENT_TERMINATED,
                    "the MPS client has been terminated by the server")
    MEMD_FAKE_ERROR(CUDA_ERROR_CDP_NOT_SUPPORTED,
                    "CUDA Dynamic Parallelism is not supported in this configuration")
    MEMD_FAKE_ERROR(CUDA_ERROR_CDP_VERSION_MISMATCH,
                    "the module mixes versions of CUDA Dynamic Parallelism")
    MEMD_FAKE_ERROR(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                    "the operation is not permitted when the stream is capturing")
    MEMD_FAKE_ERROR(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                    "the stream capture sequence has been invalidated")
    MEMD_FAKE_ERROR(CUDA_ERROR_STREAM_CAPTURE_MERGE,
                    "the operation would merge two independent capture sequences")
    MEMD_FAKE_ERROR(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED,
                    "the capture was not initiated in this stream")
    MEMD_FAKE_ERROR(CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
                    "the capture sequence has a fork that was not joined")
    MEMD_FAKE_ERROR(CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
                    "the dependency would cross the capture sequence boundary")
    MEMD_FAKE_ERROR(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
                    "a disallowed implicit dependency on a capture from the legacy stream")
    MEMD_FAKE_ERROR(CUDA_ERROR_CAPTURED_EVENT,
                    "the operation is not permitted on an event recorded in a capture")
    MEMD_FAKE_ERROR(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
                    "the stream capture was ended from another thread")
    MEMD_FAKE_ERROR(CUDA_ERROR_TIMEOUT, "wait operation timed out")
    MEMD_FAKE_ERROR(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
                    "the graph update violated the update constraints")
    MEMD_FAKE_ERROR(CUDA_ERROR_EXTERNAL_DEVICE,
                    "an async error has occurred in a device outside of CUDA")
    MEMD_FAKE_ERROR(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                    "a kernel launch error due to cluster misconfiguration")
    MEMD_FAKE_ERROR(CUDA_ERROR_FUNCTION_NOT_LOADED, "the function is not loaded")
    MEMD_FAKE_ERROR(CUDA_ERROR_INVALID_RESOURCE_TYPE,
                    "a resource is not of a valid type for the operation")
    MEMD_FAKE_ERROR(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
                    "the resources are insufficient or inapplicable for the operation")
    MEMD_FAKE_ERROR(CUDA_ERROR_KEY_ROTATION, "an error happened during the key rotation sequence")
    MEMD_FAKE_ERROR(CUDA_ERROR_UNKNOWN, "unknown error")
};
#undef MEMD_FAKE_ERROR

const ErrorText* Find(CUresult code) {
  for (const ErrorText& error : kErrors) {
    if (error.code == code) return &error;
  }
  return nullptr;
}

}  // namespace

const char* ErrorName(CUresult code) {
  const ErrorText* error = Find(code);
  return error == nullptr ? nullptr : error->name;
}

const char* ErrorDescription(CUresult code) {
  const ErrorText* error = Find(code);
  return error == nullptr ? nullptr : error->description;
}

}  // namespace memd::fake_cuda
