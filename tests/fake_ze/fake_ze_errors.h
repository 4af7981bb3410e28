#pragma once

// memd FAKE Level Zero driver (a test double): ze_result_t names.

#include <level_zero/ze_api.h>

namespace memd::fake_ze {

// "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY" for that code; nullptr for a code
// ze_api.h (API 1.4) does not define. Used for messages and to reject
// undefined codes in MEMD_FAKE_ZE_INIT_ERROR and MEMD_FAKE_ZE_FAULTS.
const char* ResultName(ze_result_t code);

}  // namespace memd::fake_ze
