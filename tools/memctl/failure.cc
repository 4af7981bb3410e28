#include "tools/memctl/failure.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"

namespace memd::memctl {
namespace {

constexpr char kStepPayload[] = "type.memd.dev/memctl.FailedStep";
constexpr char kPartialPayload[] = "type.memd.dev/memctl.Partial";

}  // namespace

absl::Status Failed(std::string_view what, absl::Status status) {
  if (status.ok() || status.GetPayload(kStepPayload).has_value()) return status;
  status.SetPayload(kStepPayload, absl::Cord(absl::string_view(what.data(), what.size())));
  return status;
}

absl::Status Partial(absl::Status status) {
  if (!status.ok()) status.SetPayload(kPartialPayload, absl::Cord());
  return status;
}

bool IsPartial(const absl::Status& status) {
  return status.GetPayload(kPartialPayload).has_value();
}

std::string FailedStep(const absl::Status& status) {
  absl::optional<absl::Cord> step = status.GetPayload(kStepPayload);
  return step.has_value() ? std::string(*step) : std::string();
}

std::string FailureLine(const absl::Status& status, std::string_view fallback) {
  std::string step = FailedStep(status);
  if (step.empty()) step = std::string(fallback);
  return absl::StrCat("memctl: ", step, ": ", absl::StatusCodeToString(status.code()),
                      ": ", status.message());
}

}  // namespace memd::memctl
