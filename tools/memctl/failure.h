#pragma once

// How memctl reports a failed operation: one line on stderr,
//   memctl: <what failed>: <STATUS_CODE>: <message>
// The "what" travels with the status as a payload, so a helper deep down
// (reading a file) can name its step and the command above it does not
// overwrite it with a vaguer one.

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace memd::memctl {

// Exit codes that scripts can rely on.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // The operation failed (daemon, I/O).
inline constexpr int kExitUsage = 2;   // The command line was wrong.

// Returns `status` naming `what` as the failed step, unless it already names
// one (the innermost step is the most precise). OK stays OK.
absl::Status Failed(std::string_view what, absl::Status status);

// The step `status` names, or empty.
std::string FailedStep(const absl::Status& status);

// Marks `status` as the failure of a command that did part of its work
// (unlink of several names: some were unlinked): what it printed stands
// and memctl writes it before the failure line. OK stays OK.
absl::Status Partial(absl::Status status);
bool IsPartial(const absl::Status& status);

// "memctl: <what>: <CODE>: <message>" (what defaults to `fallback`).
std::string FailureLine(const absl::Status& status, std::string_view fallback);

}  // namespace memd::memctl
