#include "client/src/c_api/flat_info.h"

#include <cstddef>
#include <cstring>
#include <new>
#include <string>

#include "absl/time/time.h"

namespace memd::c_api {
namespace {

constexpr std::size_t kAlign = alignof(std::max_align_t);

std::size_t RoundUp(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::size_t StringBytes(const BufferInfo& info) {
  std::size_t bytes = info.name.size() + 1 + info.location.size() + 1 +
                      info.sync_state.size() + 1 + info.fill_failure.size() + 1;
  for (const auto& [key, value] : info.attrs) bytes += key.size() + 1 + value.size() + 1;
  for (const ReplicaInfo& replica : info.replicas) {
    bytes += replica.location.size() + 1 + replica.state.size() + 1;
  }
  return bytes;
}

// Lays `infos` out in a block that starts with `header_bytes` for the
// caller's header. Returns the block; *items points at the infos in it.
void* Lay(std::span<const BufferInfo> infos, std::size_t header_bytes,
          memd_buffer_info** items) {
  std::size_t attrs = 0;
  std::size_t replicas = 0;
  std::size_t chars = 0;
  for (const BufferInfo& info : infos) {
    attrs += info.attrs.size();
    replicas += info.replicas.size();
    chars += StringBytes(info);
  }
  const std::size_t infos_at = RoundUp(header_bytes);
  const std::size_t attrs_at = RoundUp(infos_at + infos.size() * sizeof(memd_buffer_info));
  const std::size_t replicas_at = RoundUp(attrs_at + attrs * sizeof(memd_attr));
  const std::size_t chars_at = replicas_at + replicas * sizeof(memd_replica);
  void* block = std::calloc(1, chars_at + chars);
  if (block == nullptr) throw std::bad_alloc();
  auto* base = static_cast<char*>(block);
  *items = reinterpret_cast<memd_buffer_info*>(base + infos_at);
  auto* attr = reinterpret_cast<memd_attr*>(base + attrs_at);
  auto* replica = reinterpret_cast<memd_replica*>(base + replicas_at);
  char* next = base + chars_at;
  auto copy = [&next](const std::string& text) {
    std::memcpy(next, text.data(), text.size());
    const char* copied = next;
    next += text.size() + 1;  // calloc wrote the NUL.
    return copied;
  };
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const BufferInfo& info = infos[i];
    memd_buffer_info& out = (*items)[i];
    out.struct_size = sizeof(memd_buffer_info);
    out.name = copy(info.name);
    out.id = info.id;
    out.size = info.size;
    out.location = copy(info.location);
    out.owner_uid = info.owner_uid;
    out.owner_gid = info.owner_gid;
    out.mode = info.mode;
    out.sealed = info.state == BufferState::kSealed;
    out.ephemeral = info.persistence == Persistence::kEphemeral;
    out.unlinked = info.unlinked;
    out.lease_count = info.lease_count;
    out.creator_pid = info.creator_pid;
    out.created_unix_ns = absl::ToUnixNanos(info.created);
    out.sealed_unix_ns = info.sealed ? absl::ToUnixNanos(*info.sealed) : 0;
    out.attrs = attr;
    out.attr_count = info.attrs.size();
    for (const auto& [key, value] : info.attrs) {
      attr->key = copy(key);
      attr->value = copy(value);
      ++attr;
    }
    out.sync_state = copy(info.sync_state);
    out.generation = info.generation;
    out.fill_failure = copy(info.fill_failure);
    out.replicas = replica;
    out.replica_count = info.replicas.size();
    for (const ReplicaInfo& from : info.replicas) {
      replica->location = copy(from.location);
      replica->state = copy(from.state);
      replica->generation = from.generation;
      replica->readers = from.readers;
      replica->writers = from.writers;
      replica->bytes = from.bytes;
      replica->charged_uid = from.charged_uid;
      ++replica;
    }
  }
  return block;
}

}  // namespace

InfoBlock FlatInfo(const BufferInfo& info) {
  memd_buffer_info* item = nullptr;
  // With no header the info sits at offset 0: item is the block itself.
  return InfoBlock(static_cast<memd_buffer_info*>(Lay({&info, 1}, 0, &item)));
}

ListBlock FlatList(std::span<const BufferInfo> infos) {
  memd_buffer_info* items = nullptr;
  auto* list = static_cast<memd_buffer_list*>(Lay(infos, sizeof(memd_buffer_list), &items));
  list->count = infos.size();
  list->items = items;
  return ListBlock(list);
}

absl::Status HandInfo(absl::StatusOr<BufferInfo> info, memd_buffer_info** out) {
  if (!info.ok()) return info.status();
  if (out != nullptr) *out = FlatInfo(*info).release();
  return absl::OkStatus();
}

}  // namespace memd::c_api
