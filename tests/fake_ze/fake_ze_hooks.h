#pragma once

/* memd FAKE Level Zero driver (libmemd_fake_ze.so): the test hooks it exports
   besides the Level Zero table getters. C, so that any test can declare them.

   The loader opens the driver RTLD_LOCAL, so a test reaches these with
   dlopen(<path of libmemd_fake_ze.so>, RTLD_NOW | RTLD_NOLOAD) + dlsym, after
   zeInit loaded it. README.md next to this file documents them. */
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most devices the fake models (MEMD_FAKE_ZE_DEVICES). */
#define MEMD_FAKE_ZE_MAX_DEVICES 16

/* A snapshot of the driver's live objects (what a leak check wants back at
   zero after a scenario cleaned up) and of a few call totals. */
struct memd_fake_ze_counters {
  /* Live objects. */
  uint64_t contexts;
  uint64_t device_allocations;   /* zeMemAllocDevice, not yet zeMemFree'd */
  uint64_t host_allocations;     /* zeMemAllocHost, not yet zeMemFree'd */
  uint64_t device_bytes[MEMD_FAKE_ZE_MAX_DEVICES]; /* requested bytes in use */
  uint64_t device_bytes_total;
  uint64_t ipc_opened;           /* zeMemOpenIpcHandle ranges not closed */
  uint64_t cached_fds;           /* exported fds the driver holds (IPC cache 1) */
  uint64_t event_pools;
  uint64_t events;
  uint64_t command_lists;        /* regular and immediate */
  uint64_t command_queues;
  uint64_t fences;
  uint64_t pending_commands;     /* appended or submitted, not yet completed */
  uint64_t worker_threads;       /* running: one per immediate list and queue */
  /* Totals since the first zeInit of this load. */
  uint64_t ipc_get_calls;        /* successful zeMemGetIpcHandle */
  uint64_t ipc_open_calls;       /* successful zeMemOpenIpcHandle */
  uint64_t ipc_close_calls;      /* successful zeMemCloseIpcHandle */
  uint64_t cached_fd_misuse;     /* cached fds found closed or reused by the
                                    caller when zeMemFree came to close them */
};

/* Fills *out. Returns 0, or -1 if out is NULL. Thread-safe. */
int memd_fake_ze_counters(struct memd_fake_ze_counters* out);

#ifdef __cplusplus
}
#endif
