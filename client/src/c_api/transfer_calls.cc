// memd.h: copies in the daemon (Client::Copy) and the transfer handle.

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/src/c_api/errors.h"
#include "client/src/c_api/handles.h"
#include "client/src/c_api/options.h"
#include "client/src/c_api/owned_string.h"
#include "client/src/report_json.h"
#include "common/status_macros.h"
#include "memd/memd.h"

namespace memd::c_api {
namespace {

absl::StatusOr<Priority> ToPriority(memd_priority priority) {
  switch (priority) {
    case MEMD_PRIORITY_CRITICAL: return Priority::kCritical;
    case MEMD_PRIORITY_NORMAL: return Priority::kNormal;
    case MEMD_PRIORITY_BACKGROUND: return Priority::kBackground;
    default: break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "priority is ", static_cast<long long>(priority),
      "; MEMD_PRIORITY_CRITICAL (0), MEMD_PRIORITY_NORMAL (1) or MEMD_PRIORITY_BACKGROUND (2)"));
}

absl::StatusOr<CopyOptions> ToCopyOptions(const memd_copy_options* given) {
  MEMD_ASSIGN_OR_RETURN(memd_copy_options options,
                        ReadOptions(given, memd_copy_options_init, "memd_copy_options"));
  CopyOptions out;
  MEMD_ASSIGN_OR_RETURN(out.priority, ToPriority(options.priority));
  // Any other value is a time, one in the past too: Copy refuses that with
  // DEADLINE_EXCEEDED, as Python's Client.copy does.
  if (options.deadline_unix_ns != 0) out.deadline = absl::FromUnixNanos(options.deadline_unix_ns);
  out.chunk_bytes = options.chunk_bytes;
  return out;
}

// MEMD_TO_END leaves each range to the end of its buffer (Region's unset
// length), as Python's length=None.
std::optional<std::uint64_t> Length(std::uint64_t length) {
  if (length == MEMD_TO_END) return std::nullopt;
  return length;
}

// -1: no limit; else from now.
absl::StatusOr<absl::Time> WaitDeadline(int64_t timeout_ms) {
  if (timeout_ms == -1) return absl::InfiniteFuture();
  if (timeout_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout_ms is ", timeout_ms, "; at least 0, or -1 for no limit"));
  }
  return absl::Now() + absl::Milliseconds(timeout_ms);
}

}  // namespace
}  // namespace memd::c_api

using memd::c_api::Guarded;
using memd::c_api::Required;

extern "C" {

void memd_copy_options_init(memd_copy_options* options) {
  *options = {};
  options->struct_size = sizeof(*options);
  options->priority = MEMD_PRIORITY_NORMAL;
}

memd_code memd_copy(memd_client* client, const memd_buffer* source, uint64_t source_offset,
                    const memd_buffer* destination, uint64_t destination_offset,
                    uint64_t length, const memd_copy_options* options,
                    memd_transfer** transfer, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(Required(client, "client"));
    MEMD_RETURN_IF_ERROR(Required(source, "source"));
    MEMD_RETURN_IF_ERROR(Required(destination, "destination"));
    MEMD_RETURN_IF_ERROR(Required(transfer, "transfer"));
    MEMD_ASSIGN_OR_RETURN(memd::CopyOptions copy, memd::c_api::ToCopyOptions(options));
    const std::optional<std::uint64_t> each = memd::c_api::Length(length);
    MEMD_ASSIGN_OR_RETURN(
        memd::Transfer started,
        client->client->Copy(memd::Region{source->lease.get(), source_offset, each},
                             memd::Region{destination->lease.get(), destination_offset, each},
                             copy));
    *transfer = new memd_transfer{std::move(started)};
    return absl::OkStatus();
  });
}

uint64_t memd_transfer_id(const memd_transfer* transfer) {
  return transfer == nullptr ? 0 : transfer->transfer.id();
}

memd_code memd_transfer_wait(memd_transfer* transfer, int64_t timeout_ms, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(Required(transfer, "transfer"));
    MEMD_ASSIGN_OR_RETURN(absl::Time deadline, memd::c_api::WaitDeadline(timeout_ms));
    return transfer->transfer.Wait(deadline);
  });
}

memd_code memd_transfer_progress_json(memd_transfer* transfer, char** json,
                                      memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(Required(transfer, "transfer"));
    MEMD_RETURN_IF_ERROR(Required(json, "json"));
    MEMD_ASSIGN_OR_RETURN(memd::TransferProgress progress, transfer->transfer.Progress());
    *json = memd::c_api::NewString(
        memd::internal::DumpJson(memd::internal::TransferProgressJson(progress)));
    return absl::OkStatus();
  });
}

memd_code memd_transfer_cancel(memd_transfer* transfer, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(Required(transfer, "transfer"));
    return transfer->transfer.Cancel();
  });
}

void memd_transfer_free(memd_transfer* transfer) { delete transfer; }

}  // extern "C"
