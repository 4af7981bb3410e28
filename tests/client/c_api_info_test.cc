// memd_buffer_info, the C API's copy of BufferInfo, field by field: the
// structured bindings below stop compiling when either struct gains a
// field, and send whoever added it here and to client/src/c_api/flat_info.cc.

#include <cstring>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/src/c_api/flat_info.h"
#include "gtest/gtest.h"

namespace memd::c_api {
namespace {

BufferInfo EveryFieldSet(int n) {
  BufferInfo info;
  auto& [name, id, size, location, owner_uid, owner_gid, mode, state, persistence, lease_count,
         unlinked, created, sealed, creator_pid, attrs, replicas, sync_state, generation,
         fill_failure, usage, placement, retention, numa_node, holders] = info;
  name = "buffers/" + std::to_string(n);
  id = 100 + n;
  size = 4096 * (n + 1);
  location = "device:" + std::to_string(n);
  owner_uid = 1000 + n;
  owner_gid = 2000 + n;
  mode = 0640;
  state = BufferState::kSealed;
  persistence = Persistence::kEphemeral;
  lease_count = 3 + n;
  unlinked = true;
  created = absl::FromUnixNanos(1'700'000'000'000'000'000 + n);
  sealed = absl::FromUnixNanos(1'700'000'000'500'000'000 + n);
  creator_pid = 4242 + n;
  attrs = {{"dtype", "float16"}, {"shape", std::to_string(n) + ",4096"}};
  replicas = {{"host", "current", 7 + std::uint64_t(n), 2, 0, size, owner_uid},
              {"device:" + std::to_string(n), "filling", 6, 0, 1, 2 * size, 3000u + n}};
  sync_state = "host_dirty";
  generation = 7 + n;
  fill_failure = "device:" + std::to_string(n) + ": out of memory";
  // memd_buffer_info carries no per-buffer counters.
  usage = {};
  // Not in memd_buffer_info, whose size ABI 0.2 fixes (it is an array
  // element of memd_buffer_list): memd_buffer_placement and memd_stat_json
  // carry it (c_api_test.c).
  placement = "rule " + std::to_string(n);
  // Not in memd_buffer_info either: memd_buffer_retention and memd_stat_json.
  retention = "evictable";
  // Nor this: memd_buffer_numa_node and memd_stat_json.
  numa_node = n;
  // Stat's alone, and a list of its own: memd_stat_json carries it.
  holders = {};
  return info;
}

void ExpectSame(const BufferInfo& info, const memd_buffer_info& out) {
  const auto& [struct_size, name, id, size, location, owner_uid, owner_gid, mode, sealed,
               ephemeral, unlinked, lease_count, creator_pid, created_unix_ns, sealed_unix_ns,
               attrs, attr_count, sync_state, generation, fill_failure, replicas,
               replica_count] = out;
  EXPECT_EQ(struct_size, sizeof(memd_buffer_info));
  EXPECT_EQ(name, info.name);
  EXPECT_EQ(id, info.id);
  EXPECT_EQ(size, info.size);
  EXPECT_EQ(location, info.location);
  EXPECT_EQ(owner_uid, info.owner_uid);
  EXPECT_EQ(owner_gid, info.owner_gid);
  EXPECT_EQ(mode, info.mode);
  EXPECT_EQ(sealed != 0, info.state == BufferState::kSealed);
  EXPECT_EQ(ephemeral != 0, info.persistence == Persistence::kEphemeral);
  EXPECT_EQ(unlinked != 0, info.unlinked);
  EXPECT_EQ(lease_count, info.lease_count);
  EXPECT_EQ(creator_pid, info.creator_pid);
  EXPECT_EQ(created_unix_ns, absl::ToUnixNanos(info.created));
  EXPECT_EQ(sealed_unix_ns, info.sealed ? absl::ToUnixNanos(*info.sealed) : 0);
  ASSERT_EQ(attr_count, info.attrs.size());
  size_t i = 0;
  for (const auto& [key, value] : info.attrs) {
    EXPECT_EQ(attrs[i].key, key);
    EXPECT_EQ(attrs[i].value, value);
    ++i;
  }
  EXPECT_EQ(sync_state, info.sync_state);
  EXPECT_EQ(generation, info.generation);
  EXPECT_EQ(fill_failure, info.fill_failure);
  ASSERT_EQ(replica_count, info.replicas.size());
  for (size_t r = 0; r < replica_count; ++r) {
    const auto& [where, state, copy_generation, readers, writers, bytes, charged_uid] =
        replicas[r];
    const ReplicaInfo& want = info.replicas[r];
    EXPECT_EQ(where, want.location);
    EXPECT_EQ(state, want.state);
    EXPECT_EQ(copy_generation, want.generation);
    EXPECT_EQ(readers, want.readers);
    EXPECT_EQ(writers, want.writers);
    EXPECT_EQ(bytes, want.bytes);
    EXPECT_EQ(charged_uid, want.charged_uid);
  }
}

TEST(CApiInfoTest, EveryFieldOfBufferInfoReachesC) {
  const BufferInfo info = EveryFieldSet(1);
  InfoBlock block = FlatInfo(info);
  ExpectSame(info, *block);
}

TEST(CApiInfoTest, AnUnsealedBufferHasNoSealTime) {
  BufferInfo info = EveryFieldSet(2);
  info.sealed.reset();
  info.state = BufferState::kCreating;
  info.attrs.clear();
  InfoBlock block = FlatInfo(info);
  ExpectSame(info, *block);
  EXPECT_EQ(block->sealed_unix_ns, 0);
}

TEST(CApiInfoTest, AListIsOneBlockOfIndependentItems) {
  std::vector<BufferInfo> infos;
  for (int n = 0; n < 5; ++n) infos.push_back(EveryFieldSet(n));
  infos[3].attrs.clear();
  infos[2].replicas.clear();
  ListBlock list = FlatList(infos);
  ASSERT_EQ(list->count, infos.size());
  for (size_t n = 0; n < infos.size(); ++n) ExpectSame(infos[n], list->items[n]);
  EXPECT_EQ(FlatList({})->count, 0u);
}

}  // namespace
}  // namespace memd::c_api
