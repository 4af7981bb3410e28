// memd.h: what the daemon reports, as the JSON documents memctl prints
// (client/src/report_json.h), and GPU numbering.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/src/c_api/errors.h"
#include "client/src/c_api/handles.h"
#include "client/src/c_api/owned_string.h"
#include "client/src/report_json.h"
#include "common/status_macros.h"
#include "memd/memd.h"

namespace memd::c_api {
namespace {

using internal::DumpJson;
using internal::Json;

absl::Status ClientAndOut(const memd_client* client, const void* out, const char* what) {
  MEMD_RETURN_IF_ERROR(Required(client, "client"));
  return Required(out, what);
}

// An array of `to_json` of each item: the documents memctl prints.
template <typename Item>
Json ArrayOf(const std::vector<Item>& items, Json (*to_json)(const Item&)) {
  Json json = Json::array();
  for (const Item& item : items) json.push_back(to_json(item));
  return json;
}

}  // namespace
}  // namespace memd::c_api

using memd::c_api::ArrayOf;
using memd::c_api::ClientAndOut;
using memd::c_api::DumpJson;
using memd::c_api::Guarded;
using memd::c_api::NewString;
using memd::c_api::Required;

extern "C" {

void memd_string_free(char* text) { std::free(text); }

memd_code memd_stats_json(memd_client* client, char** json, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndOut(client, json, "json"));
    MEMD_ASSIGN_OR_RETURN(memd::DaemonStats stats, client->client->Stats());
    *json = NewString(DumpJson(memd::internal::StatsJson(stats, client->client->socket_dir())));
    return absl::OkStatus();
  });
}

memd_code memd_stat_json(memd_client* client, const char* name, char** json,
                         memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndOut(client, json, "json"));
    MEMD_RETURN_IF_ERROR(Required(name, "name"));
    MEMD_ASSIGN_OR_RETURN(memd::BufferInfo info, client->client->Stat(name));
    *json = NewString(DumpJson(memd::internal::BufferJson(info)));
    return absl::OkStatus();
  });
}

memd_code memd_list_json(memd_client* client, const char* prefix, char** json,
                         memd_error** error) {
  return memd_list_json_flags(client, prefix, 0, json, error);
}

memd_code memd_list_json_flags(memd_client* client, const char* prefix, unsigned flags,
                               char** json, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndOut(client, json, "json"));
    if ((flags & ~MEMD_LIST_UNLINKED) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown list flags 0x", absl::Hex(flags & ~MEMD_LIST_UNLINKED),
          " (this library knows MEMD_LIST_UNLINKED, 0x", absl::Hex(MEMD_LIST_UNLINKED), ")"));
    }
    memd::ListOptions options;
    options.include_unlinked = (flags & MEMD_LIST_UNLINKED) != 0;
    MEMD_ASSIGN_OR_RETURN(std::vector<memd::BufferInfo> buffers,
                          client->client->List(prefix == nullptr ? "" : prefix, options));
    *json = NewString(DumpJson(ArrayOf(buffers, &memd::internal::BufferJson)));
    return absl::OkStatus();
  });
}

memd_code memd_sessions_json(memd_client* client, char** json, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndOut(client, json, "json"));
    MEMD_ASSIGN_OR_RETURN(auto sessions, client->client->Sessions());
    *json = NewString(DumpJson(ArrayOf(sessions, memd::internal::SessionJson)));
    return absl::OkStatus();
  });
}

memd_code memd_transfers_json(memd_client* client, char** json, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndOut(client, json, "json"));
    MEMD_ASSIGN_OR_RETURN(memd::TransferList transfers, client->client->Transfers());
    *json = NewString(DumpJson(memd::internal::TransferListJson(transfers)));
    return absl::OkStatus();
  });
}

memd_code memd_usage_json(memd_client* client, char** json, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndOut(client, json, "json"));
    MEMD_ASSIGN_OR_RETURN(auto usage, client->client->Usage());
    *json = NewString(DumpJson(ArrayOf(usage, memd::internal::UsageJson)));
    return absl::OkStatus();
  });
}

memd_code memd_trim_json(memd_client* client, const char* location, char** json,
                         memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndOut(client, json, "json"));
    MEMD_ASSIGN_OR_RETURN(auto trimmed,
                          client->client->Trim(location == nullptr ? "" : location));
    *json = NewString(DumpJson(ArrayOf(trimmed, memd::internal::TrimmedPoolJson)));
    return absl::OkStatus();
  });
}

memd_code memd_advise_json(memd_client* client, const char* prefix, char** json,
                           memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndOut(client, json, "json"));
    MEMD_ASSIGN_OR_RETURN(auto advice, client->client->Advise(prefix == nullptr ? "" : prefix));
    *json = NewString(DumpJson(ArrayOf(advice, memd::internal::RecommendationJson)));
    return absl::OkStatus();
  });
}

memd_code memd_leaks_json(memd_client* client, uint64_t older_than_seconds,
                          uint64_t many_leases, char** json, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndOut(client, json, "json"));
    memd::LeaksOptions options;
    // 0 keeps the default: C has no "unset".
    if (older_than_seconds != 0) {
      options.older_than = absl::Seconds(static_cast<std::int64_t>(
          std::min<std::uint64_t>(older_than_seconds, std::numeric_limits<std::int64_t>::max())));
    }
    if (many_leases != 0) options.many_leases = many_leases;
    MEMD_ASSIGN_OR_RETURN(memd::LeakReport report, client->client->Leaks(options));
    *json = NewString(DumpJson(memd::internal::LeakReportJson(report)));
    return absl::OkStatus();
  });
}

memd_code memd_cuda_device(memd_client* client, const char* location, int* cuda_device,
                           memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndOut(client, cuda_device, "cuda_device"));
    MEMD_RETURN_IF_ERROR(Required(location, "location"));
    MEMD_ASSIGN_OR_RETURN(*cuda_device, client->client->CudaDevice(location));
    return absl::OkStatus();
  });
}

memd_code memd_device_location(memd_client* client, int cuda_device, char** location,
                               memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndOut(client, location, "location"));
    MEMD_ASSIGN_OR_RETURN(std::string found, client->client->DeviceLocation(cuda_device));
    *location = NewString(found);
    return absl::OkStatus();
  });
}

}  // extern "C"
