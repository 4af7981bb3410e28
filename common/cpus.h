#pragma once

// How many CPUs this process may run on, for sizing thread pools.

namespace memd {

// The CPUs in this process's affinity mask (taskset, a cpuset), at least 1;
// the online CPUs where the mask does not fit a cpu_set_t (over 1024). A
// CPU quota (a container's cpu.max) is not counted: it limits time, not
// where threads run.
int UsableCpus();

}  // namespace memd
