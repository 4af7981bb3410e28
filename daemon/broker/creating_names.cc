#include "daemon/broker/creating_names.h"

#include <algorithm>
#include <utility>

namespace memd::broker {

bool CreatingNames::Begin(const std::string& name) {
  return names_.try_emplace(name).second;
}

void CreatingNames::Wait(const std::string& name, WatchId watch,
                         absl::FunctionRef<bool(WatchId)> still_waits) {
  auto creating = names_.find(name);
  if (creating == names_.end()) return;
  std::vector<WatchId>& waiting = creating->second;
  waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                               [&](WatchId id) { return id == watch || !still_waits(id); }),
                waiting.end());
  waiting.push_back(watch);
}

std::vector<WatchId> CreatingNames::End(const std::string& name) {
  auto creating = names_.find(name);
  if (creating == names_.end()) return {};
  std::vector<WatchId> waiting = std::move(creating->second);
  names_.erase(creating);
  return waiting;
}

}  // namespace memd::broker
