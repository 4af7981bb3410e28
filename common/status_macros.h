#pragma once

// MEMD_RETURN_IF_ERROR / MEMD_ASSIGN_OR_RETURN: this Abseil release
// (20220623) ships no status macros of its own. Prefixed, because protobuf's
// headers define unprefixed ones of the same names.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MEMD_CONCAT_INNER_(a, b) a##b
#define MEMD_CONCAT_(a, b) MEMD_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define MEMD_RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status memd_status_ = (expr);              \
    if (!memd_status_.ok()) return memd_status_;       \
  } while (false)

// MEMD_ASSIGN_OR_RETURN(lhs, expr): evaluates the StatusOr `expr`; returns its
// status when not OK, else moves its value into `lhs` (which may declare a
// variable: MEMD_ASSIGN_OR_RETURN(auto fd, Open(path))).
#define MEMD_ASSIGN_OR_RETURN(lhs, expr) \
  MEMD_ASSIGN_OR_RETURN_IMPL_(MEMD_CONCAT_(memd_statusor_, __LINE__), lhs, expr)

#define MEMD_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()
