#pragma once

// memd FAKE Level Zero driver (a test double): its environment, parsed. Pure
// functions, no driver state. README.md next to this file documents each
// variable:
//
//   MEMD_FAKE_ZE_DEVICES          0..16                       (1)
//   MEMD_FAKE_ZE_MEMORY           bytes per device            (1 GiB)
//   MEMD_FAKE_ZE_IPC_CACHE        0 or 1                      (1)
//   MEMD_FAKE_ZE_POOL_OFFSET      multiple of 4096 < 2 MiB    (0)
//   MEMD_FAKE_ZE_INIT_ERROR       a ze_result_t zeInit returns
//   MEMD_FAKE_ZE_FAULTS           "zeMemAllocDevice@2=0x70000002;..."
//   MEMD_FAKE_ZE_POISON           0 or 1                      (0)
//   MEMD_FAKE_ZE_COPY_LATENCY_US  0..10000000                 (0)

#include <level_zero/ze_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/fake_ze/fake_ze_api.h"

namespace memd::fake_ze {

constexpr int kMaxDevices = 16;
constexpr uint64_t kPoolSize = uint64_t{2} << 20;  // Intel's pooled block.
constexpr uint64_t kPageSize = 4096;

// The Nth call (1-based, counted from the first successful zeInit) of `api`
// returns `code` and does nothing else.
struct Fault {
  Api api = Api::kInit;
  uint64_t call = 0;
  ze_result_t code = ZE_RESULT_SUCCESS;
};

struct Config {
  int devices = 1;
  uint64_t memory = uint64_t{1} << 30;
  bool ipc_cache = true;
  uint64_t pool_offset = 0;
  ze_result_t init_error = ZE_RESULT_SUCCESS;
  std::vector<Fault> faults;
  bool poison = false;
  uint64_t copy_latency_us = 0;
};

// Reads every MEMD_FAKE_ZE_* variable with `getenv` (an empty value counts as
// unset). Returns false and says which variable is wrong, and why, in `error`.
bool ReadConfig(const char* (*getenv)(const char*), Config* config, std::string* error);

// MEMD_FAKE_ZE_FAULTS alone, for ReadConfig and its tests.
bool ParseFaults(const std::string& text, std::vector<Fault>* faults, std::string* error);

}  // namespace memd::fake_ze
