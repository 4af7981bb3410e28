#include "client/src/ze_imports.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace memd::internal {

ZeImport::~ZeImport() {
  if (base != 0) {
    loader->api().MemCloseIpcHandle(context, reinterpret_cast<const void*>(base));
  }
  // The descriptor closes after the close: the driver may use it until then.
}

absl::StatusOr<std::shared_ptr<const ze::Loader>> ZeImports::LoaderLocked() {
  if (loader_ == nullptr) {
    auto loaded = ze::Loader::Load();
    if (!loaded.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "this buffer lives in Level Zero GPU memory and this process has no usable "
          "Level Zero: ", loaded.status().message()));
    }
    loader_ = *std::move(loaded);
  }
  return loader_;
}

absl::StatusOr<std::pair<int, const ze::Gpu*>> ZeImports::FindLocked(const std::string& uuid) {
  MEMD_ASSIGN_OR_RETURN(std::shared_ptr<const ze::Loader> loader, LoaderLocked());
  const std::vector<ze::Gpu>& gpus = loader->gpus();
  for (std::size_t index = 0; index < gpus.size(); ++index) {
    if (gpus[index].uuid == uuid) return std::make_pair(static_cast<int>(index), &gpus[index]);
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "this process does not see Level Zero GPU ", uuid, " (it sees ", gpus.size(),
      "; ZE_AFFINITY_MASK or the container's devices leave it out)"));
}

absl::StatusOr<void*> ZeImports::Context(const std::string& device_uuid) {
  PlainMutexLock lock(&mu_);
  MEMD_ASSIGN_OR_RETURN(auto found, FindLocked(device_uuid));
  return app_context_ != nullptr ? app_context_ : found.second->context;
}

absl::StatusOr<std::shared_ptr<ZeImport>> ZeImports::Import(std::uint64_t generation,
                                                           ZeHandle handle) {
  PlainMutexLock lock(&mu_);
  ze_ipc_mem_handle_t ipc{};
  if (handle.ipc_handle.size() != sizeof(ipc.data)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the daemon sent a Level Zero IPC handle of ", handle.ipc_handle.size(),
        " bytes; it should be ", sizeof(ipc.data)));
  }
  MEMD_ASSIGN_OR_RETURN(auto found, FindLocked(handle.device_uuid));
  std::weak_ptr<ZeImport>& slot = imports_[{generation, handle.segment_id}];
  if (std::shared_ptr<ZeImport> shared = slot.lock()) return shared;  // `handle.fd` closes.
  std::memcpy(ipc.data, handle.ipc_handle.data(), sizeof(ipc.data));
  // The handle names the daemon's descriptor; this process received its own.
  const std::uint64_t fd = static_cast<std::uint64_t>(handle.fd.get());
  std::memcpy(ipc.data, &fd, sizeof(fd));
  auto import = std::make_shared<ZeImport>();
  import->loader = loader_;
  import->context = app_context_ != nullptr ? app_context_ : found.second->context;
  import->device = found.first;
  import->level_zero = true;
  void* base = nullptr;
  absl::Status opened = loader_->Check(
      loader_->api().MemOpenIpcHandle(import->context, found.second->device, ipc, 0, &base),
      "zeMemOpenIpcHandle", handle.device);
  if (!opened.ok()) {
    imports_.erase({generation, handle.segment_id});
    return opened;
  }
  import->base = reinterpret_cast<std::uint64_t>(base);
  import->bytes = handle.segment_bytes;
  import->fd = std::move(handle.fd);
  slot = import;
  return import;
}

}  // namespace memd::internal
