// memd.h: versions, options, the client's calls.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/src/c_api/errors.h"
#include "client/src/c_api/handles.h"
#include "client/src/c_api/options.h"
#include "common/attrs.h"
#include "common/names.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "memd/memd.h"

namespace memd::c_api {
namespace {

absl::StatusOr<absl::Duration> Milliseconds(int64_t ms, const char* what) {
  if (ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", ms, "; at least 0"));
  }
  return absl::Milliseconds(ms);
}

absl::StatusOr<std::optional<uid_t>> Uid(int64_t uid, const char* what) {
  if (uid == -1) return std::nullopt;
  if (uid < 0 || uid > int64_t{UINT32_MAX} - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", uid, "; a uid, or -1 for none"));
  }
  return static_cast<uid_t>(uid);
}

absl::StatusOr<ConnectOptions> ToConnectOptions(const memd_connect_options* given) {
  MEMD_ASSIGN_OR_RETURN(memd_connect_options options,
                        ReadOptions(given, memd_connect_options_init, "memd_connect_options"));
  ConnectOptions out;
  if (options.socket_dir != nullptr) out.socket_dir = options.socket_dir;
  MEMD_ASSIGN_OR_RETURN(out.call_timeout, Milliseconds(options.call_timeout_ms, "call_timeout_ms"));
  out.mapping_cache_bytes = options.mapping_cache_bytes;
  out.device_cache_bytes = options.device_cache_bytes;
  MEMD_ASSIGN_OR_RETURN(out.daemon_uid, Uid(options.daemon_uid, "daemon_uid"));
  return out;
}

// The daemon checks keys and values; this reads no more than the limit's
// worth of the caller's array and keeps a repeated key from vanishing into
// the map.
absl::StatusOr<std::map<std::string, std::string>> ToAttrs(const memd_attr* attrs,
                                                            size_t count) {
  std::map<std::string, std::string> out;
  if (count > kMaxAttrs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attr_count is ", count, "; a buffer carries at most ", kMaxAttrs,
        " attributes"));
  }
  if (count > 0) MEMD_RETURN_IF_ERROR(Required(attrs, "attrs"));
  for (size_t i = 0; i < count; ++i) {
    const memd_attr& attr = attrs[i];
    if (attr.key == nullptr || attr.value == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("attrs[", i, "] has a NULL key or value"));
    }
    if (!out.emplace(attr.key, attr.value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("attrs[", i, "]: key ", QuotedForMessage(attr.key), " given twice"));
    }
  }
  return out;
}

// The daemon checks each location; this reads no more than its limit's
// worth of the caller's array.
absl::StatusOr<std::vector<std::string>> ToLocations(const char* const* locations,
                                                     size_t count) {
  constexpr size_t kMaxLocations = 64;  // The daemon's limit.
  if (count > kMaxLocations) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mappable_location_count is ", count, "; the limit is ", kMaxLocations));
  }
  std::vector<std::string> out;
  if (count > 0) MEMD_RETURN_IF_ERROR(Required(locations, "mappable_locations"));
  for (size_t i = 0; i < count; ++i) {
    if (locations[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("mappable_locations[", i, "] is NULL"));
    }
    out.emplace_back(locations[i]);
  }
  return out;
}

absl::StatusOr<CreateOptions> ToCreateOptions(const memd_create_options* given) {
  MEMD_ASSIGN_OR_RETURN(memd_create_options options,
                        ReadOptions(given, memd_create_options_init, "memd_create_options"));
  CreateOptions out;
  if (options.location != nullptr) out.location = options.location;
  out.mode = options.mode;
  out.persistence = options.ephemeral != 0 ? Persistence::kEphemeral : Persistence::kPersistent;
  out.populate = options.populate != 0;
  MEMD_ASSIGN_OR_RETURN(out.attrs, ToAttrs(options.attrs, options.attr_count));
  MEMD_ASSIGN_OR_RETURN(out.existing_owner, Uid(options.existing_owner, "existing_owner"));
  if (options.access_hint != nullptr) out.access_hint = options.access_hint;
  if (options.retention != nullptr) out.retention = options.retention;
  if (options.numa != nullptr) out.numa = options.numa;
  out.keep_descriptor = options.keep_descriptor != 0;
  MEMD_ASSIGN_OR_RETURN(out.wait_for_memory,
                        Milliseconds(options.wait_for_memory_ms, "wait_for_memory_ms"));
  MEMD_ASSIGN_OR_RETURN(out.mappable_locations,
                        ToLocations(options.mappable_locations, options.mappable_location_count));
  return out;
}

absl::StatusOr<OpenOptions> ToOpenOptions(const memd_open_options* given) {
  MEMD_ASSIGN_OR_RETURN(memd_open_options options,
                        ReadOptions(given, memd_open_options_init, "memd_open_options"));
  OpenOptions out;
  out.access = options.writable != 0 ? Access::kReadWrite : Access::kRead;
  MEMD_ASSIGN_OR_RETURN(out.wait, Milliseconds(options.wait_ms, "wait_ms"));
  out.populate = options.populate != 0;
  MEMD_ASSIGN_OR_RETURN(out.owner, Uid(options.owner, "owner"));
  if (options.location != nullptr) out.location = options.location;
  MEMD_ASSIGN_OR_RETURN(out.wait_for_memory,
                        Milliseconds(options.wait_for_memory_ms, "wait_for_memory_ms"));
  out.keep_descriptor = options.keep_descriptor != 0;
  return out;
}

absl::StatusOr<PrefetchOptions> ToPrefetchOptions(const memd_prefetch_options* given) {
  MEMD_ASSIGN_OR_RETURN(
      memd_prefetch_options options,
      ReadOptions(given, memd_prefetch_options_init, "memd_prefetch_options"));
  PrefetchOptions out;
  MEMD_ASSIGN_OR_RETURN(out.wait, Milliseconds(options.wait_ms, "wait_ms"));
  MEMD_ASSIGN_OR_RETURN(out.wait_for_memory,
                        Milliseconds(options.wait_for_memory_ms, "wait_for_memory_ms"));
  MEMD_ASSIGN_OR_RETURN(out.owner, Uid(options.owner, "owner"));
  return out;
}

// The checks every call on a client and a name makes.
absl::Status ClientAndName(const memd_client* client, const char* name) {
  MEMD_RETURN_IF_ERROR(Required(client, "client"));
  return Required(name, "name");
}

// Hands a granted lease to the caller as a new memd_buffer.
absl::Status Hand(absl::StatusOr<Buffer> granted, memd_buffer** out) {
  MEMD_RETURN_IF_ERROR(granted.status());
  auto buffer = std::make_unique<memd_buffer>();
  buffer->lease = std::make_shared<Buffer>(*std::move(granted));
  buffer->info = FlatInfo(buffer->lease->info());
  *out = buffer.release();
  return absl::OkStatus();
}

}  // namespace
}  // namespace memd::c_api

using memd::c_api::ClientAndName;
using memd::c_api::Guarded;
using memd::c_api::Hand;
using memd::c_api::Required;

extern "C" {

uint32_t memd_abi_version(void) { return MEMD_ABI_VERSION; }

const char* memd_version_string(void) { return memd::kVersion; }

void memd_connect_options_init(memd_connect_options* options) {
  *options = {};
  options->struct_size = sizeof(*options);
  options->call_timeout_ms = 30000;
  options->mapping_cache_bytes = std::uint64_t{256} << 20;
  options->device_cache_bytes = std::uint64_t{16} << 30;
  options->daemon_uid = -1;
}

void memd_create_options_init(memd_create_options* options) {
  *options = {};
  options->struct_size = sizeof(*options);
  options->mode = 0600;
  options->existing_owner = -1;
}

void memd_open_options_init(memd_open_options* options) {
  *options = {};
  options->struct_size = sizeof(*options);
  options->owner = -1;
}

void memd_prefetch_options_init(memd_prefetch_options* options) {
  *options = {};
  options->struct_size = sizeof(*options);
  options->owner = -1;
}

memd_code memd_connect(const memd_connect_options* options, memd_client** client,
                       memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(Required(client, "client"));
    MEMD_ASSIGN_OR_RETURN(memd::ConnectOptions connect, memd::c_api::ToConnectOptions(options));
    MEMD_ASSIGN_OR_RETURN(auto connected, memd::Client::Connect(std::move(connect)));
    *client = new memd_client{std::move(connected)};
    return absl::OkStatus();
  });
}

void memd_client_close(memd_client* client) { delete client; }

uint64_t memd_client_session_id(const memd_client* client) {
  if (client == nullptr) return 0;
  try {
    return client->client->session_id();  // May reconnect, and so allocate.
  } catch (...) {
    return 0;
  }
}

const char* memd_client_socket_dir(const memd_client* client) {
  return client == nullptr ? "" : client->client->socket_dir().c_str();
}

memd_code memd_ping(memd_client* client, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(Required(client, "client"));
    return client->client->Ping();
  });
}

memd_code memd_create(memd_client* client, const char* name, uint64_t size,
                      const memd_create_options* options, memd_buffer** buffer,
                      memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndName(client, name));
    MEMD_RETURN_IF_ERROR(Required(buffer, "buffer"));
    MEMD_ASSIGN_OR_RETURN(memd::CreateOptions create, memd::c_api::ToCreateOptions(options));
    return Hand(client->client->Create(name, size, create), buffer);
  });
}

memd_code memd_open(memd_client* client, const char* name, const memd_open_options* options,
                    memd_buffer** buffer, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndName(client, name));
    MEMD_RETURN_IF_ERROR(Required(buffer, "buffer"));
    MEMD_ASSIGN_OR_RETURN(memd::OpenOptions open, memd::c_api::ToOpenOptions(options));
    return Hand(client->client->Open(name, open), buffer);
  });
}

memd_code memd_open_or_create(memd_client* client, const char* name, uint64_t size,
                              const memd_create_options* options, int64_t wait_ms,
                              memd_buffer** buffer, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndName(client, name));
    MEMD_RETURN_IF_ERROR(Required(buffer, "buffer"));
    MEMD_ASSIGN_OR_RETURN(memd::CreateOptions create, memd::c_api::ToCreateOptions(options));
    MEMD_ASSIGN_OR_RETURN(absl::Duration wait, memd::c_api::Milliseconds(wait_ms, "wait_ms"));
    return Hand(client->client->OpenOrCreate(name, size, create, wait), buffer);
  });
}

memd_code memd_unlink(memd_client* client, const char* name, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndName(client, name));
    return client->client->Unlink(name);
  });
}

memd_code memd_stat(memd_client* client, const char* name, memd_buffer_info** info,
                    memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndName(client, name));
    MEMD_RETURN_IF_ERROR(Required(info, "info"));
    MEMD_ASSIGN_OR_RETURN(memd::BufferInfo stat, client->client->Stat(name));
    *info = memd::c_api::FlatInfo(stat).release();
    return absl::OkStatus();
  });
}

void memd_buffer_info_free(memd_buffer_info* info) { std::free(info); }

memd_code memd_prefetch(memd_client* client, const char* name, const char* location,
                        int64_t wait_ms, memd_buffer_info** info, memd_error** error) {
  memd_prefetch_options options;
  memd_prefetch_options_init(&options);
  options.wait_ms = wait_ms;
  return memd_prefetch_with(client, name, location, &options, info, error);
}

memd_code memd_prefetch_with(memd_client* client, const char* name, const char* location,
                             const memd_prefetch_options* options, memd_buffer_info** info,
                             memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndName(client, name));
    MEMD_RETURN_IF_ERROR(Required(location, "location"));
    MEMD_ASSIGN_OR_RETURN(memd::PrefetchOptions prefetch,
                          memd::c_api::ToPrefetchOptions(options));
    return memd::c_api::HandInfo(client->client->Prefetch(name, location, prefetch), info);
  });
}

memd_code memd_drop_replica(memd_client* client, const char* name, const char* location,
                            memd_buffer_info** info, memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(ClientAndName(client, name));
    MEMD_RETURN_IF_ERROR(Required(location, "location"));
    return memd::c_api::HandInfo(client->client->DropReplica(name, location), info);
  });
}

memd_code memd_list(memd_client* client, const char* prefix, memd_buffer_list** list,
                    memd_error** error) {
  return Guarded(error, [&]() -> absl::Status {
    MEMD_RETURN_IF_ERROR(Required(client, "client"));
    MEMD_RETURN_IF_ERROR(Required(list, "list"));
    MEMD_ASSIGN_OR_RETURN(auto infos, client->client->List(prefix == nullptr ? "" : prefix));
    *list = memd::c_api::FlatList(infos).release();
    return absl::OkStatus();
  });
}

void memd_buffer_list_free(memd_buffer_list* list) { std::free(list); }

}  // extern "C"
