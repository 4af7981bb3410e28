#pragma once

// What a GPU driver was asked to do when it returned an error: the copy
// sides of the backends (cuda/copy_errors.h, level_zero/ze_copy_errors.h)
// choose a status code by it as well as by the error.

namespace memd::backend {

enum class CopyCall {
  kEnqueue,  // A call that queues or creates (copies, markers, streams).
  kSurface,  // An event query or wait: the result of earlier work.
  kStaging,  // Allocating pinned staging memory.
};

}  // namespace memd::backend
