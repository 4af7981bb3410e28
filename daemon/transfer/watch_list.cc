#include "daemon/transfer/watch_list.h"

#include <algorithm>
#include <utility>

namespace memd::transfer {

std::uint64_t WatchList::Add(SessionId session, TransferId transfer, TransferDone done) {
  const std::uint64_t token = NewToken();
  waiting_[token] = Waiting{transfer, session};
  entries_[transfer].push_back(Entry{token, std::move(done)});
  ++sessions_[session];
  return token;
}

bool WatchList::Remove(std::uint64_t token) {
  auto it = waiting_.find(token);
  if (it == waiting_.end()) return false;
  const Waiting waiting = it->second;
  waiting_.erase(it);
  Forget(waiting);
  auto entries = entries_.find(waiting.transfer);
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
  for (const Entry& entry : taken) {
    auto waiting = waiting_.find(entry.token);
    if (waiting == waiting_.end()) continue;
    Forget(waiting->second);
    waiting_.erase(waiting);
  }
  return taken;
}

int WatchList::of_session(SessionId session) const {
  auto it = sessions_.find(session);
  return it == sessions_.end() ? 0 : it->second;
}

void WatchList::Forget(const Waiting& waiting) {
  auto it = sessions_.find(waiting.session);
  if (it != sessions_.end() && --it->second == 0) sessions_.erase(it);
}

}  // namespace memd::transfer
