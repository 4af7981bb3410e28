#include "daemon/transfer/watch_list.h"

#include <algorithm>
#include <utility>

namespace memd::transfer {

std::uint64_t WatchList::Add(TransferId transfer, Engine::Done done) {
  const std::uint64_t token = NewToken();
  transfers_[token] = transfer;
  entries_[transfer].push_back(Entry{token, std::move(done)});
  return token;
}

bool WatchList::Remove(std::uint64_t token) {
  auto it = transfers_.find(token);
  if (it == transfers_.end()) return false;
  auto entries = entries_.find(it->second);
  transfers_.erase(it);
  if (entries == entries_.end()) return false;
  std::erase_if(entries->second, [token](const Entry& entry) { return entry.token == token; });
  if (entries->second.empty()) entries_.erase(entries);
  return true;
}

std::vector<WatchList::Entry> WatchList::Take(TransferId transfer) {
  auto it = entries_.find(transfer);
  if (it == entries_.end()) return {};
  std::vector<Entry> taken = std::move(it->second);
  entries_.erase(it);
  for (const Entry& entry : taken) transfers_.erase(entry.token);
  return taken;
}

}  // namespace memd::transfer
