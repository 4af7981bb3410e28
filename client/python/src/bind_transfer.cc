#include <utility>

#include "absl/strings/str_cat.h"
#include "client/python/src/bindings.h"
#include "client/python/src/errors.h"
#include "client/python/src/records.h"
#include "client/python/src/transfer.h"

namespace memd::python {

void BindTransfer(py::module_& module) {
  py::class_<PyTransfer>(module, "Transfer", R"doc(A copy the daemon runs (Client.copy).

The daemon moves the bytes whether or not anyone waits; dropping this object
leaves the copy running. The daemon forgets a session's transfers when the
session ends.)doc")
      .def_property_readonly("id", &PyTransfer::id)
      .def(
          "wait",
          [](PyTransfer& self, py::object timeout) {
            const absl::Time deadline =
                timeout.is_none() ? absl::InfiniteFuture()
                                  : absl::Now() + SecondsArgument(timeout, "timeout");
            absl::Status status;
            {
              py::gil_scoped_release unlocked;
              std::lock_guard<std::mutex> lock(self.mutex());
              status = self.transfer().Wait(deadline);
            }
            Check(status);
          },
          py::arg("timeout") = py::none(),
          "Waits until the copy ends (None: however long it takes) and returns None if it "
          "succeeded; raises how it ended otherwise: CancelledError, DeadlineExceededError "
          "(its deadline, a stall, or this wait's timeout, after which the copy goes on: "
          "progress().finished is False), or the driver's error.")
      .def(
          "progress",
          [](PyTransfer& self) {
            absl::StatusOr<TransferProgress> progress;
            {
              py::gil_scoped_release unlocked;
              std::lock_guard<std::mutex> lock(self.mutex());
              progress = self.transfer().Progress();
            }
            return ToPython(Take(std::move(progress)));
          },
          "A TransferProgress: state, bytes done, path, error...")
      .def(
          "cancel",
          [](PyTransfer& self) {
            absl::Status status;
            {
              py::gil_scoped_release unlocked;
              std::lock_guard<std::mutex> lock(self.mutex());
              status = self.transfer().Cancel();
            }
            Check(status);
          },
          "Stops at the next chunk boundary; wait() then raises CancelledError. "
          "Cancelling a finished copy changes nothing.")
      .def("__repr__", [](const PyTransfer& self) {
        return absl::StrCat("<memd.Transfer id=", self.id(), ">");
      });
}

}  // namespace memd::python
