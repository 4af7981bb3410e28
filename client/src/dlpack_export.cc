#include "client/src/dlpack_export.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace memd::internal {
namespace {

constexpr int32_t kMaxDimensions = 32;

// The tensor (DLManagedTensor or memd_DLManagedTensorVersioned) and what
// keeps its memory valid, freed by its deleter.
template <typename Managed>
struct ExportedTensor {
  Managed managed = {};
  std::shared_ptr<Buffer> lease;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  void (*on_delete)(void* context) = nullptr;
  void* on_delete_context = nullptr;
};

template <typename Managed>
void DeleteExported(Managed* self) {
  auto* exported = static_cast<ExportedTensor<Managed>*>(self->manager_ctx);
  const auto on_delete = exported->on_delete;
  void* const context = exported->on_delete_context;
  delete exported;  // The lease first: the hook may end the caller's own.
  if (on_delete != nullptr) on_delete(context);
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
  const uint64_t capacity = buffer_bytes / element_bytes;
  if (options.ndim == 0 && options.scalar != 0) {
    if (capacity == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a scalar of ", element_bytes, " bytes: the buffer has ", buffer_bytes, " bytes"));
    }
    return std::vector<int64_t>{};
  }
  if (options.ndim == 0) return std::vector<int64_t>{static_cast<int64_t>(capacity)};
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

// Row-major, compact. Given explicitly, as DLPack 1.0 prefers to NULL.
std::vector<int64_t> Strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i > 1; --i) strides[i - 2] = strides[i - 1] * shape[i - 1];
  return strides;
}

// The tensor, filled; `Managed`'s own header (version, flags) is the
// caller's to set.
template <typename Managed>
absl::StatusOr<std::unique_ptr<ExportedTensor<Managed>>> Export(
    std::shared_ptr<Buffer> lease, const memd_dlpack_options& options) {
  const Buffer& buffer = *lease;
  auto element_bytes = ElementBytes(options.dtype);
  if (!element_bytes.ok()) return element_bytes.status();
  auto shape = Shape(options, *element_bytes, buffer.size());
  if (!shape.ok()) return shape.status();

  auto exported = std::make_unique<ExportedTensor<Managed>>();
  exported->shape = *std::move(shape);
  exported->strides = Strides(exported->shape);
  DLTensor& tensor = exported->managed.dl_tensor;
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
  tensor.shape = exported->shape.empty() ? nullptr : exported->shape.data();
  tensor.strides = exported->strides.empty() ? nullptr : exported->strides.data();
  tensor.byte_offset = 0;
  exported->lease = std::move(lease);
  exported->on_delete = options.on_delete;
  exported->on_delete_context = options.on_delete_context;
  exported->managed.manager_ctx = exported.get();
  exported->managed.deleter = DeleteExported<Managed>;
  return exported;
}

// Whether the export is read-only; FAILED_PRECONDITION for a released buffer.
absl::StatusOr<bool> ReadOnly(const Buffer& buffer, const memd_dlpack_options& options) {
  if (!buffer) return absl::FailedPreconditionError("the buffer holds no lease");
  return !buffer.writable() || options.read_only != 0;
}

}  // namespace

absl::StatusOr<DLManagedTensor*> ExportDlpack(std::shared_ptr<Buffer> lease,
                                              const memd_dlpack_options& options) {
  auto read_only = ReadOnly(*lease, options);
  if (!read_only.ok()) return read_only.status();
  if (*read_only && options.allow_read_only == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        lease->writable() ? "read_only is set" : "a read-only lease",
        ", and a DLPack 0.6 tensor exports read-only memory only with allow_read_only set: it "
        "cannot mark a tensor read-only, and a consumer may write through it (host and CUDA "
        "memory is mapped read-only here; Level Zero memory cannot be); "
        "memd_buffer_to_dlpack_versioned can"));
  }
  auto exported = Export<DLManagedTensor>(std::move(lease), options);
  if (!exported.ok()) return exported.status();
  return &exported->release()->managed;
}

absl::StatusOr<memd_DLManagedTensorVersioned*> ExportDlpackVersioned(
    std::shared_ptr<Buffer> lease, const memd_dlpack_options& options) {
  auto read_only = ReadOnly(*lease, options);
  if (!read_only.ok()) return read_only.status();
  auto exported = Export<memd_DLManagedTensorVersioned>(std::move(lease), options);
  if (!exported.ok()) return exported.status();
  memd_DLManagedTensorVersioned& managed = (*exported)->managed;
  managed.version = {1, 0};
  managed.flags = *read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  return &exported->release()->managed;
}

}  // namespace memd::internal
