// memd FAKE Level Zero driver (a test double): parsing of its MEMD_FAKE_ZE_*
// environment. Strict on purpose: a typo in a test's environment must fail
// zeInit loudly, not run the test under defaults it did not ask for.

#include "tests/fake_ze/fake_ze_config.h"

#include <cstring>
#include <string_view>

#include "tests/fake_ze/fake_ze_errors.h"

namespace memd::fake_ze {
namespace {

constexpr uint64_t kMaxMemory = uint64_t{1} << 50;
constexpr uint64_t kMaxLatencyUs = 10'000'000;

// Decimal digits, or with `hex` also 0x followed by hex digits; no sign, no
// spaces, at most `max`.
bool ParseNumber(std::string_view text, uint64_t max, bool hex, uint64_t* value) {
  int base = 10;
  if (hex && text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  if (text.empty() || text.size() > 20) return false;
  uint64_t result = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (base == 16 && c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (base == 16 && c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    const uint64_t d = static_cast<uint64_t>(digit);
    if (d > max || result > (max - d) / static_cast<uint64_t>(base)) return false;
    result = result * static_cast<uint64_t>(base) + d;
  }
  *value = result;
  return true;
}

// A code ze_api.h defines (decimal or 0x...), for the init error and faults.
bool ParseResult(std::string_view text, ze_result_t* code) {
  uint64_t value = 0;
  if (!ParseNumber(text, UINT32_MAX, /*hex=*/true, &value)) return false;
  *code = static_cast<ze_result_t>(value);
  return ResultName(*code) != nullptr;
}

// One "zeName@N=CODE" entry.
bool ParseFault(std::string_view entry, Fault* fault, std::string* error) {
  size_t at = entry.find('@');
  size_t equals = entry.find('=');
  if (at == std::string_view::npos || equals == std::string_view::npos || equals < at) {
    *error = "entry '" + std::string(entry) + "' is not NAME@N=CODE";
    return false;
  }
  std::string_view name = entry.substr(0, at);
  if (!FindApi(name, &fault->api) || fault->api == Api::kInit) {
    *error = "'" + std::string(name) + "' is not a function the fake implements (zeInit excluded)";
    return false;
  }
  if (!ParseNumber(entry.substr(at + 1, equals - at - 1), UINT64_MAX, false, &fault->call) ||
      fault->call == 0) {
    *error = "entry '" + std::string(entry) + "': N must be a decimal number from 1";
    return false;
  }
  if (!ParseResult(entry.substr(equals + 1), &fault->code) || fault->code == ZE_RESULT_SUCCESS) {
    *error = "entry '" + std::string(entry) + "': CODE must be a ze_result_t other than 0";
    return false;
  }
  return true;
}

using Getenv = const char* (*)(const char*);

// The variable's value, or nullptr when unset or empty.
const char* Value(Getenv getenv, const char* name) {
  const char* value = getenv(name);
  return value != nullptr && value[0] != '\0' ? value : nullptr;
}

// A plain decimal variable within [min, max]; unset leaves *value alone.
bool ReadNumber(Getenv getenv, const char* name, uint64_t min, uint64_t max, uint64_t* value,
                std::string* error) {
  const char* text = Value(getenv, name);
  if (text == nullptr) return true;
  uint64_t parsed = 0;
  if (!ParseNumber(text, max, false, &parsed) || parsed < min) {
    *error = std::string(name) + "='" + text + "': expected a decimal number from " +
             std::to_string(min) + " to " + std::to_string(max);
    return false;
  }
  *value = parsed;
  return true;
}

bool ReadFlag(Getenv getenv, const char* name, bool* flag, std::string* error) {
  uint64_t value = *flag ? 1 : 0;
  if (!ReadNumber(getenv, name, 0, 1, &value, error)) return false;
  *flag = value == 1;
  return true;
}

bool ReadPoolOffset(Getenv getenv, Config* config, std::string* error) {
  if (!ReadNumber(getenv, "MEMD_FAKE_ZE_POOL_OFFSET", 0, kPoolSize - 1, &config->pool_offset,
                  error)) {
    return false;
  }
  if (config->pool_offset % kPageSize != 0) {
    *error = "MEMD_FAKE_ZE_POOL_OFFSET=" + std::to_string(config->pool_offset) +
             ": not a multiple of 4096";
    return false;
  }
  return true;
}

bool ReadInitError(Getenv getenv, Config* config, std::string* error) {
  const char* text = Value(getenv, "MEMD_FAKE_ZE_INIT_ERROR");
  if (text == nullptr) return true;
  if (!ParseResult(text, &config->init_error)) {
    *error = std::string("MEMD_FAKE_ZE_INIT_ERROR='") + text +
             "': not a ze_result_t of ze_api.h (decimal or 0x...)";
    return false;
  }
  return true;
}

}  // namespace

bool ParseFaults(const std::string& text, std::vector<Fault>* faults, std::string* error) {
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t end = rest.find(';');
    Fault fault;
    if (!ParseFault(rest.substr(0, end), &fault, error)) return false;
    faults->push_back(fault);
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
    if (rest.empty()) {
      *error = "trailing ';'";
      return false;
    }
  }
  return true;
}

bool ReadConfig(Getenv getenv, Config* config, std::string* error) {
  uint64_t devices = static_cast<uint64_t>(config->devices);
  if (!ReadNumber(getenv, "MEMD_FAKE_ZE_DEVICES", 0, kMaxDevices, &devices, error)) return false;
  config->devices = static_cast<int>(devices);
  if (!ReadNumber(getenv, "MEMD_FAKE_ZE_MEMORY", 1, kMaxMemory, &config->memory, error) ||
      !ReadFlag(getenv, "MEMD_FAKE_ZE_IPC_CACHE", &config->ipc_cache, error) ||
      !ReadPoolOffset(getenv, config, error) || !ReadInitError(getenv, config, error) ||
      !ReadFlag(getenv, "MEMD_FAKE_ZE_POISON", &config->poison, error) ||
      !ReadNumber(getenv, "MEMD_FAKE_ZE_COPY_LATENCY_US", 0, kMaxLatencyUs,
                  &config->copy_latency_us, error)) {
    return false;
  }
  const char* faults = Value(getenv, "MEMD_FAKE_ZE_FAULTS");
  if (faults != nullptr && !ParseFaults(faults, &config->faults, error)) {
    *error = "MEMD_FAKE_ZE_FAULTS: " + *error;
    return false;
  }
  return true;
}

}  // namespace memd::fake_ze
