#pragma once

// Valid durable states for the tests of daemon/durable.

#include <cstdint>
#include <string>

#include "daemon/durable/state.h"

namespace memd::durable::test {

inline SegmentEntry SampleSegment(std::uint64_t id, const char* location = "host") {
  return SegmentEntry{.id = id, .location = location, .device_uuid = "", .bytes = 1 << 20,
                      .small = false, .uid = 1000, .gid = 100, .mode = 0640};
}

inline BufferEntry SampleBuffer(std::uint64_t id, std::uint64_t segment_id, std::uint64_t offset,
                                const char* location = "host") {
  BufferEntry buffer;
  buffer.id = id;
  buffer.name = "models/w" + std::to_string(id);
  buffer.size = 4000;
  buffer.location = location;
  buffer.owner_uid = 1000;
  buffer.owner_gid = 100;
  buffer.mode = 0640;
  buffer.created_unix_ns = 1'700'000'000'000'000'000 + static_cast<std::int64_t>(id);
  buffer.creator_pid = 4242;
  buffer.attrs = {{"dtype", "float16"}, {"shape", "32,32"}};
  buffer.segment_id = segment_id;
  buffer.offset = offset;
  buffer.allocation_bytes = 4096;
  return buffer;
}

// A digest of kTokenDigestBytes bytes, each `fill` (any bytes will do).
inline SessionEntry SampleSession(std::uint64_t id, char fill) {
  return SessionEntry{.id = id, .uid = 1000, .token_digest = std::string(kTokenDigestBytes, fill)};
}

// Two segments (host and device:0) and three buffers: one sealed, one
// unlinked sharing a linked buffer's name. Three sessions: one holding
// leases on buffers 10 (read) and 12 (read-write, unlinked since), one on 11
// and 10, one holding none.
inline DurableState SampleState() {
  DurableState state;
  state.generation = 3;
  state.segments[1] = SampleSegment(1);
  SegmentEntry device = SampleSegment(2, "device:0");
  device.device_uuid = "GPU-12345678-1234-1234-1234-123456789abc";
  state.segments[2] = device;
  state.buffers[10] = SampleBuffer(10, 1, 0);
  BufferEntry sealed = SampleBuffer(11, 1, 4096);
  sealed.sealed = true;
  sealed.sealed_unix_ns = 1'700'000'000'000'000'500;
  sealed.retention = "evictable";
  sealed.numa_node = 1;
  state.buffers[11] = sealed;
  BufferEntry unlinked = SampleBuffer(12, 2, 8192, "device:0");
  unlinked.name = state.buffers[10].name;
  unlinked.unlinked = true;
  unlinked.ephemeral = true;
  state.buffers[12] = unlinked;
  state.sessions[100] = SampleSession(100, '\x01');
  state.sessions[101] = SampleSession(101, '\xfe');
  state.sessions[102] = SampleSession(102, '\0');
  state.leases[1000] = LeaseEntry{.id = 1000, .session_id = 100, .buffer_id = 10};
  state.leases[1001] =
      LeaseEntry{.id = 1001, .session_id = 100, .buffer_id = 12, .writable = true};
  state.leases[1002] = LeaseEntry{.id = 1002, .session_id = 101, .buffer_id = 11};
  state.leases[1003] = LeaseEntry{.id = 1003, .session_id = 101, .buffer_id = 10};
  return state;
}

}  // namespace memd::durable::test
