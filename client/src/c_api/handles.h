#pragma once

// What memd.h's opaque handles hold.

#include <memory>

#include "client/src/c_api/flat_info.h"
#include "memd/client.h"
#include "memd/memd.h"

// Thread-safe: memd::Client is.
struct memd_client {
  std::unique_ptr<memd::Client> client;
};

// Not thread-safe, as memd::Buffer. The lease is shared with the DLPack
// tensors exported from it: the last of them to let go ends the lease and
// unmaps (~Buffer; errors dropped). A tensor's deleter may run on any
// thread, which shared_ptr's count allows.
struct memd_buffer {
  std::shared_ptr<memd::Buffer> lease;
  memd::c_api::InfoBlock info;  // Of lease->info(), rebuilt by a seal.
};

// Not thread-safe, as memd::Transfer. Holds the client's core, so it may
// outlive the memd_client.
struct memd_transfer {
  memd::Transfer transfer;
};
