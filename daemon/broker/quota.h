#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/location.h"

namespace memd::broker {

// A byte quota per location, as the configuration writes it:
//   ""  or "0"                     no quota anywhere
//   "16GiB"                        16 GiB in every location
//   "host=16GiB,device=40GiB"      per location kind ("device": each GPU);
//                                  unnamed locations have none
//   "device=40GiB,device:1=8GiB"   one GPU's own figure wins over "device"
// Sizes take binary units (common/bytes.h); 0 means none. Immutable value;
// thread-compatible.
class Quota {
 public:
  // Errors: INVALID_ARGUMENT naming the part that is wrong.
  static absl::StatusOr<Quota> Parse(std::string_view text);

  // The quota at `location`; 0: none.
  std::uint64_t For(const Location& location) const;
  bool empty() const;

 private:
  std::uint64_t all_ = 0;  // The bare "SIZE" form.
  std::uint64_t host_ = 0;
  std::uint64_t pinned_ = 0;
  std::uint64_t device_ = 0;
  absl::flat_hash_map<int, std::uint64_t> devices_;  // "device:N=".
};

}  // namespace memd::broker
