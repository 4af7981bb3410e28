#include "client/src/c_api/dlpack.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"

namespace memd::c_api {
namespace {

constexpr int32_t kMaxDimensions = 32;

// The tensor and what keeps its memory valid, freed by its deleter.
struct ExportedTensor {
  DLManagedTensor tensor = {};
  std::shared_ptr<Buffer> lease;
  std::vector<int64_t> shape;
};

void DeleteExported(DLManagedTensor* self) {
  delete static_cast<ExportedTensor*>(self->manager_ctx);
}

absl::StatusOr<uint64_t> ElementBytes(DLDataType dtype) {
  if (dtype.bits == 0 || dtype.bits % 8 != 0 || dtype.lanes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dtype of ", dtype.bits, " bits and ", dtype.lanes,
        " lanes: memd exports whole bytes (bits a nonzero multiple of 8, at least one lane)"));
  }
  return uint64_t{dtype.bits} / 8 * dtype.lanes;
}

// The shape the caller asked for, or every whole element in one dimension,
// checked against the buffer's bytes.
absl::StatusOr<std::vector<int64_t>> Shape(const memd_dlpack_options& options,
                                           uint64_t element_bytes, uint64_t buffer_bytes) {
  if (options.ndim == 0) {
    return std::vector<int64_t>{static_cast<int64_t>(buffer_bytes / element_bytes)};
  }
  if (options.ndim < 0 || options.ndim > kMaxDimensions) {
    return absl::InvalidArgumentError(
        absl::StrCat("ndim is ", options.ndim, "; 0 to ", kMaxDimensions, " dimensions"));
  }
  if (options.shape == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("ndim is ", options.ndim, " but shape is NULL"));
  }
  std::vector<int64_t> shape(options.shape, options.shape + options.ndim);
  for (int32_t i = 0; i < options.ndim; ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape[", i, "] is ", shape[i], "; dimensions are at least 0"));
    }
  }
  const uint64_t capacity = buffer_bytes / element_bytes;
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return shape;  // No elements.
  uint64_t elements = 1;
  for (int64_t extent : shape) {
    if (elements > capacity / static_cast<uint64_t>(extent)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the shape holds more than ", capacity, " elements of ", element_bytes,
          " bytes: the buffer has ", buffer_bytes, " bytes"));
    }
    elements *= static_cast<uint64_t>(extent);
  }
  return shape;
}

}  // namespace

absl::StatusOr<DLManagedTensor*> ExportDlpack(std::shared_ptr<Buffer> lease,
                                              const memd_dlpack_options& options) {
  const Buffer& buffer = *lease;
  if (!buffer) return absl::FailedPreconditionError("the buffer holds no lease");
  if (!buffer.writable() && options.allow_read_only == 0) {
    return absl::FailedPreconditionError(
        "a read-only lease exports to DLPack only with allow_read_only set: DLPack 0.6 cannot "
        "mark a tensor read-only, and a consumer may write through it (host and CUDA memory "
        "is mapped read-only here; Level Zero memory cannot be)");
  }
  auto element_bytes = ElementBytes(options.dtype);
  if (!element_bytes.ok()) return element_bytes.status();
  auto shape = Shape(options, *element_bytes, buffer.size());
  if (!shape.ok()) return shape.status();

  auto exported = std::make_unique<ExportedTensor>();
  exported->shape = *std::move(shape);
  DLTensor& tensor = exported->tensor.dl_tensor;
  if (buffer.device() >= 0) {
    tensor.data = reinterpret_cast<void*>(static_cast<uintptr_t>(buffer.device_pointer()));
    tensor.device = {buffer.level_zero() ? static_cast<DLDeviceType>(kDLOneAPIDevice) : kDLCUDA,
                     buffer.device()};
  } else {
    tensor.data = const_cast<std::byte*>(buffer.data().data());
    tensor.device = {kDLCPU, 0};
  }
  tensor.ndim = static_cast<int32_t>(exported->shape.size());
  tensor.dtype = options.dtype;
  tensor.shape = exported->shape.data();
  tensor.strides = nullptr;  // Row-major, compact.
  tensor.byte_offset = 0;
  exported->lease = std::move(lease);
  exported->tensor.manager_ctx = exported.get();
  exported->tensor.deleter = DeleteExported;
  return &exported.release()->tensor;
}

}  // namespace memd::c_api
