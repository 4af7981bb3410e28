#pragma once

// What memd.h's opaque handles hold.

#include <memory>

#include "client/src/c_api/flat_info.h"
#include "memd/client.h"
#include "memd/memd.h"

namespace memd::c_api {

// A lease shared by a memd_buffer and the DLPack tensors exported from it:
// the last of them to let go ends the lease and unmaps (the Buffer's
// destructor; errors dropped). Thread-safe as shared_ptr is: a tensor's
// deleter may run on any thread.
struct SharedLease {
  Buffer buffer;
};

}  // namespace memd::c_api

// Thread-safe: memd::Client is.
struct memd_client {
  std::unique_ptr<memd::Client> client;
};

// Not thread-safe, as memd::Buffer.
struct memd_buffer {
  std::shared_ptr<memd::c_api::SharedLease> lease;
  memd::c_api::InfoBlock info;  // Of lease->buffer.info(), rebuilt by a seal.
};
