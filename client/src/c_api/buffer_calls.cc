// memd.h: a buffer's calls.

#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "client/src/c_api/errors.h"
#include "client/src/c_api/flat_info.h"
#include "client/src/c_api/handles.h"
#include "client/src/c_api/options.h"
#include "client/src/dlpack_export.h"
#include "common/status_macros.h"
#include "memd/memd.h"

using memd::c_api::Guarded;
using memd::c_api::Required;

namespace {

// Either kind of tensor, by `export_tensor` (memd::internal's exporters).
template <typename Tensor, typename Export>
memd_code ToDlpack(memd_buffer* buffer, const memd_dlpack_options* options, Tensor** tensor,
                   memd_error** error, Export export_tensor) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(Required(buffer, "buffer"));
    MEMD_RETURN_IF_ERROR(Required(tensor, "tensor"));
    MEMD_ASSIGN_OR_RETURN(
        memd_dlpack_options dlpack,
        memd::c_api::ReadOptions(options, memd_dlpack_options_init, "memd_dlpack_options"));
    MEMD_ASSIGN_OR_RETURN(*tensor, export_tensor(buffer->lease, dlpack));
    return absl::OkStatus();
  });
}

}  // namespace

extern "C" {

memd_code memd_buffer_seal(memd_buffer* buffer, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(Required(buffer, "buffer"));
    MEMD_RETURN_IF_ERROR(buffer->lease->Seal());
    buffer->info = memd::c_api::FlatInfo(buffer->lease->info());
    return absl::OkStatus();
  });
}

memd_code memd_buffer_write_from_file(memd_buffer* buffer, int fd, uint64_t file_offset,
                                      uint64_t length, uint64_t offset, int threads,
                                      memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(Required(buffer, "buffer"));
    if (threads < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("threads is ", threads, "; 0 (one per CPU, at most 8) or more"));
    }
    return buffer->lease->WriteFromFile(fd, file_offset, length, offset, threads);
  });
}

memd_code memd_buffer_sync(memd_buffer* buffer, memd_buffer_info** info, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(Required(buffer, "buffer"));
    return memd::c_api::HandInfo(buffer->lease->Sync(), info);
  });
}

memd_code memd_buffer_release(memd_buffer* buffer, memd_error** error) {
  std::unique_ptr<memd_buffer> owned(buffer);
  return Guarded(error, [&]() -> absl::Status {
    if (owned == nullptr) return absl::OkStatus();
    // DLPack tensors hold the lease too: the last of them ends it.
    if (owned->lease.use_count() > 1) return absl::OkStatus();
    return owned->lease->Release();
  });
}

const void* memd_buffer_data(const memd_buffer* buffer) {
  if (buffer == nullptr) return nullptr;
  const auto data = buffer->lease->data();
  return data.empty() ? nullptr : data.data();
}

void* memd_buffer_mutable_data(memd_buffer* buffer) {
  if (buffer == nullptr) return nullptr;
  const auto data = buffer->lease->mutable_data();
  return data.empty() ? nullptr : data.data();
}

uint64_t memd_buffer_size(const memd_buffer* buffer) {
  return buffer == nullptr ? 0 : buffer->lease->size();
}

uint64_t memd_buffer_device_pointer(const memd_buffer* buffer) {
  return buffer == nullptr ? 0 : buffer->lease->device_pointer();
}

int memd_buffer_device(const memd_buffer* buffer) {
  return buffer == nullptr ? -1 : buffer->lease->device();
}

int memd_buffer_device_type(const memd_buffer* buffer) {
  if (buffer == nullptr) return 0;
  if (buffer->lease->level_zero()) return memd::internal::kDLOneAPIDevice;
  return buffer->lease->device() >= 0 ? kDLCUDA : kDLCPU;
}

int memd_buffer_writable(const memd_buffer* buffer) {
  return buffer != nullptr && buffer->lease->writable();
}

int memd_buffer_created(const memd_buffer* buffer) {
  return buffer != nullptr && buffer->lease->created();
}

uint64_t memd_buffer_lease_id(const memd_buffer* buffer) {
  return buffer == nullptr ? 0 : buffer->lease->lease_id();
}

const memd_buffer_info* memd_buffer_get_info(const memd_buffer* buffer) {
  return buffer == nullptr ? nullptr : buffer->info.get();
}

const char* memd_buffer_attr(const memd_buffer* buffer, const char* key) {
  if (buffer == nullptr || key == nullptr) return nullptr;
  const memd_buffer_info& info = *buffer->info;
  for (size_t i = 0; i < info.attr_count; ++i) {
    if (std::strcmp(info.attrs[i].key, key) == 0) return info.attrs[i].value;
  }
  return nullptr;
}

const char* memd_buffer_placement(const memd_buffer* buffer) {
  return buffer == nullptr ? nullptr : buffer->lease->info().placement.c_str();
}

const char* memd_buffer_retention(const memd_buffer* buffer) {
  return buffer == nullptr ? nullptr : buffer->lease->info().retention.c_str();
}

int memd_buffer_numa_node(const memd_buffer* buffer) {
  return buffer == nullptr ? -1 : buffer->lease->info().numa_node;
}

void memd_dlpack_options_init(memd_dlpack_options* options) {
  *options = {};
  options->struct_size = sizeof(*options);
  options->dtype = {kDLUInt, 8, 1};
}

memd_code memd_buffer_to_dlpack(memd_buffer* buffer, const memd_dlpack_options* options,
                                DLManagedTensor** tensor, memd_error** error) {
  return ToDlpack(buffer, options, tensor, error, memd::internal::ExportDlpack);
}

memd_code memd_buffer_to_dlpack_versioned(memd_buffer* buffer,
                                          const memd_dlpack_options* options,
                                          memd_DLManagedTensorVersioned** tensor,
                                          memd_error** error) {
  return ToDlpack(buffer, options, tensor, error, memd::internal::ExportDlpackVersioned);
}

}  // extern "C"
