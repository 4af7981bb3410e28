#pragma once

// libmemd's result structs -> memd._types dataclasses (GIL held). Times
// become float seconds since the Unix epoch, durations float seconds, enums
// lower-case strings.

#include <map>
#include <string>

#include <pybind11/pybind11.h>

#include "absl/time/time.h"
#include "memd/client.h"

namespace memd::python {

namespace py = pybind11;

double EpochSeconds(absl::Time time);
py::dict AttrsDict(const std::map<std::string, std::string>& attrs);

py::object ToPython(const BufferInfo& info);
py::object ToPython(const DaemonStats& stats);
py::object ToPython(const SessionInfo& session);
py::object ToPython(const UidUsage& usage);
py::object ToPython(const TrimmedPool& pool);
py::object ToPython(const TransferProgress& progress);

template <typename T>
py::list ToPythonList(const std::vector<T>& items) {
  py::list list;
  for (const T& item : items) list.append(ToPython(item));
  return list;
}

}  // namespace memd::python
