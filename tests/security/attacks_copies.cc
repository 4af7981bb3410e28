// Attack steps on the transfer engine's shares (issue 22, finding 3): one
// uid filling the copies in flight with many sessions, or keeping a lane
// busy with many runnable critical copies; and the plain copies of the user
// who must still be served.
//
// The attacker speaks raw gRPC on raw sessions (tests/support/raw_session.h);
// the victim is an ordinary libmemd client. Each prints (or reports at its
// gate, tests/security/held_attack.h) what it got, refusals as
// "CODE: message".

#include <atomic>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "memd/client.h"
#include "tests/security/attack_steps.h"
#include "tests/security/attacks.h"
#define MEMD_HOSTILE_SIDE_ONLY
#include "tests/security/held_attack.h"
#include "tests/support/raw_session.h"

namespace memd::hostile {
namespace {

std::optional<v1::TransferPriority> RawPriority(const std::string& name) {
  if (name == "critical") return v1::PRIORITY_CRITICAL;
  if (name == "normal") return v1::PRIORITY_NORMAL;
  if (name == "background") return v1::PRIORITY_BACKGROUND;
  return std::nullopt;
}

std::optional<Priority> ClientPriority(const std::string& name) {
  if (name == "critical") return Priority::kCritical;
  if (name == "normal") return Priority::kNormal;
  if (name == "background") return Priority::kBackground;
  return std::nullopt;
}

// A buffer of `size` bytes the session creates and keeps writable (a copy's
// destination); its lease id, or the refusal.
grpc::Status CreateKept(const test::RawSession& raw, const std::string& name,
                        std::uint64_t size, std::uint64_t* lease_id) {
  v1::Lease lease;
  grpc::Status status = RawCalls(raw).Create(name, size, "host", &lease);
  *lease_id = lease.lease_id();
  return status;
}

grpc::Status Copy(const test::RawSession& raw, std::uint64_t source, std::uint64_t destination,
                  std::uint64_t size, v1::TransferPriority priority, std::uint64_t* id) {
  return RawCalls(raw).Copy(source, destination, size, id, priority);
}

// Whether the session's transfer `id` has finished: the daemon says DONE,
// or has forgotten it (a session keeps only its last finished records, and
// the attacker asks only about ids it was given).
bool Finished(const test::RawSession& raw, std::uint64_t id) {
  v1::WaitTransferRequest wait;
  wait.set_transfer_id(id);
  v1::TransferProgress progress;
  grpc::Status status = raw.Call(&v1::Memd::Stub::WaitTransfer, wait, &progress);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) return true;
  return status.ok() && progress.state() == v1::TRANSFER_DONE;
}

// How many of `chain` (copies into one destination, which run in
// submission order) have finished: a prefix, found by bisection so that the
// count takes few calls while the rest keep running.
std::size_t FinishedOf(const test::RawSession& raw, const std::vector<std::uint64_t>& chain) {
  std::size_t low = 0;
  std::size_t high = chain.size();
  while (low < high) {
    const std::size_t middle = low + (high - low) / 2;
    if (Finished(raw, chain[middle])) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  return low;
}

std::size_t FinishedOf(const test::RawSession& raw,
                       const std::vector<std::vector<std::uint64_t>>& chains) {
  std::size_t finished = 0;
  for (const auto& chain : chains) finished += FinishedOf(raw, chain);
  return finished;
}

// What a plain client's copy of `size` bytes at `priority` came to: "done",
// or why not.
std::string CopyOwn(Client& client, Buffer& source, Buffer& destination, Priority priority,
                    std::uint64_t chunk_bytes) {
  auto transfer =
      client.Copy({&source}, {&destination}, {.priority = priority, .chunk_bytes = chunk_bytes});
  if (!transfer.ok()) return Refusal(transfer.status());
  const absl::Status waited = transfer->Wait(absl::Now() + absl::Seconds(120));
  return waited.ok() ? "done" : Refusal(waited);
}

struct OwnBuffers {
  std::unique_ptr<Client> client;
  Buffer source;
  Buffer destination;
};

absl::StatusOr<OwnBuffers> MakeOwnBuffers(std::uint64_t size) {
  ConnectOptions options;
  options.socket_dir = SocketDir();
  auto client = Client::Connect(options);
  if (!client.ok()) return client.status();
  auto source = (*client)->Create("own/source", size);
  if (!source.ok()) return source.status();
  auto destination = (*client)->Create("own/destination", size);
  if (!destination.ok()) return destination.status();
  return OwnBuffers{std::move(*client), std::move(*source), std::move(*destination)};
}

}  // namespace

MEMD_ATTACK(fill_copies,
            "SESSIONS SIZE GATE: opens SESSIONS sessions; in each copies a source "
            "of SIZE bytes into a destination of its own until refused; reports "
            "'copies K' and the last refusal at GATE, then holds them and keeps "
            "them full: as a copy ends its session asks for another") {
  if (args.size() != 3) return 2;
  const int sessions = std::stoi(args[0]);
  const std::uint64_t size = std::stoull(args[1]);
  struct Filled {
    test::RawSession raw;
    std::uint64_t source = 0;
    std::uint64_t destination = 0;
    std::deque<std::uint64_t> copies;  // Unfinished, in the order they run.
  };
  std::vector<Filled> held;
  std::string refusal;
  // Every session and its buffers first, then the copies in one burst: a
  // session made between two sessions' copies gave the earlier copies time
  // to end on a slow machine, so that the uid never had them all unfinished.
  for (int s = 0; s < sessions; ++s) {
    auto raw = test::RawSession::Connect(SocketDir());
    if (!raw.ok()) {
      refusal = Refusal(raw.status());
      break;
    }
    Filled filled{std::move(*raw), 0, 0, {}};
    grpc::Status made =
        CreateKept(filled.raw, absl::StrCat("fill/source/", s), size, &filled.source);
    if (made.ok()) {
      made = CreateKept(filled.raw, absl::StrCat("fill/destination/", s), size,
                        &filled.destination);
    }
    if (!made.ok()) {
      refusal = Refusal(made);
      break;
    }
    held.push_back(std::move(filled));
  }
  int copies = 0;
  for (Filled& filled : held) {
    // Copies into one destination run one after another: the later ones
    // stay unfinished behind the first. A bound, should they all finish
    // faster than they are asked for.
    for (int i = 0; i < 100000; ++i) {
      std::uint64_t id = 0;
      grpc::Status copied = Copy(filled.raw, filled.source, filled.destination, size,
                                 v1::PRIORITY_NORMAL, &id);
      if (!copied.ok()) {
        refusal = Refusal(copied);
        break;
      }
      filled.copies.push_back(id);
      ++copies;
    }
  }
  // What a client that means it does: each session waits for its running
  // copy and asks for the next at once, so that the budget it took is never
  // free for long.
  std::atomic<bool> stop{false};
  std::vector<std::thread> refills;
  for (Filled& filled : held) {
    if (filled.copies.empty()) continue;
    refills.emplace_back([&filled, &stop, size] {
      while (!stop.load() && !filled.copies.empty()) {
        v1::WaitTransferRequest wait;
        wait.set_transfer_id(filled.copies.front());
        wait.set_wait_ms(100);
        v1::TransferProgress progress;
        grpc::Status waited = filled.raw.Call(&v1::Memd::Stub::WaitTransfer, wait, &progress);
        const bool ended = waited.error_code() == grpc::StatusCode::NOT_FOUND ||
                           (waited.ok() && progress.state() != v1::TRANSFER_QUEUED &&
                            progress.state() != v1::TRANSFER_RUNNING);
        if (!ended) continue;
        filled.copies.pop_front();
        std::uint64_t id = 0;
        if (Copy(filled.raw, filled.source, filled.destination, size, v1::PRIORITY_NORMAL, &id)
                .ok()) {
          filled.copies.push_back(id);
        }
      }
    });
  }
  const bool held_ok =
      test::HoldAtGate(args[2], absl::StrCat("copies ", copies, "\n", refusal, "\n"));
  stop.store(true);
  for (std::thread& refill : refills) refill.join();
  return held_ok ? 0 : 3;
}

MEMD_ATTACK(flood_copies,
            "CHAINS PER_CHAIN SIZE PRIORITY GATE: in one session, copies a source of "
            "SIZE bytes PER_CHAIN times into each of CHAINS destinations (so CHAINS "
            "copies are runnable at any time) at PRIORITY; reports 'copies N' and "
            "'finished F' at GATE; when released prints 'finished F' again") {
  if (args.size() != 5) return 2;
  const int chains = std::stoi(args[0]);
  const int per_chain = std::stoi(args[1]);
  const std::uint64_t size = std::stoull(args[2]);
  const std::optional<v1::TransferPriority> priority = RawPriority(args[3]);
  if (!priority) return 2;
  auto raw = test::RawSession::Connect(SocketDir());
  if (!raw.ok()) {
    std::printf("%s\n", Refusal(raw.status()).c_str());
    return 1;
  }
  std::uint64_t source = 0;
  grpc::Status made = CreateKept(*raw, "flood/source", size, &source);
  std::vector<std::uint64_t> destinations(chains);
  for (int c = 0; c < chains && made.ok(); ++c) {
    made = CreateKept(*raw, absl::StrCat("flood/destination/", c), size, &destinations[c]);
  }
  if (!made.ok()) {
    std::printf("%s\n", Refusal(made).c_str());
    return 1;
  }
  std::vector<std::vector<std::uint64_t>> ids(chains);
  for (int i = 0; i < per_chain; ++i) {
    for (int c = 0; c < chains; ++c) {
      std::uint64_t id = 0;
      grpc::Status copied = Copy(*raw, source, destinations[c], size, *priority, &id);
      if (!copied.ok()) {
        std::printf("%s\n", Refusal(copied).c_str());
        return 1;
      }
      ids[c].push_back(id);
    }
  }
  const std::size_t before = FinishedOf(*raw, ids);
  if (!test::HoldAtGate(args[4], absl::StrCat("copies ", chains * per_chain, "\nfinished ",
                                              before, "\n"))) {
    return 3;
  }
  std::printf("finished %zu\n", FinishedOf(*raw, ids));
  return 0;
}

MEMD_ATTACK(copy_own,
            "SIZE PRIORITY...: through libmemd creates two buffers of SIZE bytes and "
            "copies one into the other at each PRIORITY in turn, waiting for each; "
            "prints 'PRIORITY done' or 'PRIORITY CODE: message' per copy") {
  if (args.size() < 2) return 2;
  auto own = MakeOwnBuffers(std::stoull(args[0]));
  if (!own.ok()) {
    std::printf("%s\n", Refusal(own.status()).c_str());
    return 1;
  }
  int exit_code = 0;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::optional<Priority> priority = ClientPriority(args[i]);
    if (!priority) return 2;
    const std::string result = CopyOwn(*own->client, own->source, own->destination, *priority, 0);
    if (result != "done") exit_code = 1;
    std::printf("%s %s\n", args[i].c_str(), result.c_str());
  }
  return exit_code;
}

MEMD_ATTACK(copy_on_release,
            "SIZE CHUNK PRIORITY GATE: through libmemd creates two buffers of SIZE "
            "bytes and reports 'ready' at GATE; when released copies one into the "
            "other in chunks of CHUNK bytes at PRIORITY and waits; prints "
            "'PRIORITY done' or 'PRIORITY CODE: message'") {
  if (args.size() != 4) return 2;
  const std::optional<Priority> priority = ClientPriority(args[2]);
  if (!priority) return 2;
  auto own = MakeOwnBuffers(std::stoull(args[0]));
  if (!own.ok()) {
    std::printf("%s\n", Refusal(own.status()).c_str());
    return 1;
  }
  if (!test::HoldAtGate(args[3], "ready\n")) return 3;
  const std::string result = CopyOwn(*own->client, own->source, own->destination, *priority,
                                     std::stoull(args[1]));
  std::printf("%s %s\n", args[2].c_str(), result.c_str());
  return result == "done" ? 0 : 1;
}

}  // namespace memd::hostile
