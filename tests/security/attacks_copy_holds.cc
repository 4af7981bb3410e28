// Attack steps through copies that outlive what they name (issue 22): memory
// kept by a copy after its buffer was freed (finding 1), bytes written into
// a buffer behind its seal (finding 2), WaitTransfer calls held in the
// daemon (finding 4), what a refusal tells of another's buffer (finding
// 6), and what Stat and List tell of others' leases (issue 29). Against a
// daemon on the fake CUDA driver's slow link
// (tests/security/slow_copies.h), a copy to or from device:0 is the chain
// that keeps the copies queued behind it unfinished.
//
// Each prints (or reports at its gate, tests/security/held_attack.h) what
// it got and the first refusal as "CODE: message".

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/security/attack_steps.h"
#include "tests/security/attacks.h"
#define MEMD_HOSTILE_SIDE_ONLY
#include "tests/security/held_attack.h"
#include "tests/support/raw_session.h"

namespace memd::hostile {
namespace {

// The chain: FEED (host) copied onto CHAIN (device:0), `bytes` over the
// slow link. Copies that write CHAIN's first bytes, or read them, wait
// behind it.
grpc::Status StartChain(const RawCalls& calls, std::uint64_t bytes, v1::Lease* chain) {
  v1::Lease feed;
  grpc::Status status = calls.Create("mallory/feed", bytes, "host", &feed);
  if (status.ok()) status = calls.Create("mallory/chain", bytes, "device:0", chain);
  std::uint64_t transfer = 0;
  if (status.ok()) status = calls.Copy(feed.lease_id(), chain->lease_id(), bytes, &transfer);
  return status;
}

// Whether `status` is OK; else its refusal goes to stderr, for a step that
// stops at the first.
bool Succeeded(const grpc::Status& status) {
  if (!status.ok()) std::fprintf(stderr, "%s\n", Refusal(status).c_str());
  return status.ok();
}

}  // namespace

MEMD_ATTACK(park_behind_chain,
            "CHAIN_BYTES PARK_BYTES COUNT GATE: starts a chain of CHAIN_BYTES onto "
            "device:0, then up to COUNT times creates a host buffer of PARK_BYTES, "
            "queues a 1-byte copy from it behind the chain and releases it (so that "
            "only the copy keeps it); reports 'parked K' and the first refusal at "
            "GATE, then holds") {
  if (args.size() != 4) return 2;
  auto session = StepSession();
  if (!session) return 1;
  const RawCalls calls(*session);
  v1::Lease chain;
  if (grpc::Status started = StartChain(calls, std::stoull(args[0]), &chain); !started.ok()) {
    std::fprintf(stderr, "chain: %s\n", Refusal(started).c_str());
    return 1;
  }
  const int count = std::stoi(args[2]);
  int parked = 0;
  std::string refusal;
  for (; parked < count; ++parked) {
    v1::Lease park;
    std::uint64_t transfer = 0;
    grpc::Status status =
        calls.Create(absl::StrCat("mallory/park/", parked), std::stoull(args[1]), "host", &park);
    if (status.ok()) status = calls.Copy(park.lease_id(), chain.lease_id(), 1, &transfer);
    if (status.ok()) status = calls.Release(park.lease_id());
    if (!status.ok()) {
      refusal = Refusal(status);
      break;
    }
  }
  return test::HoldAtGate(args[3], absl::StrCat("parked ", parked, "\n", refusal, "\n")) ? 0 : 3;
}

MEMD_ATTACK(write_behind_chain,
            "NAME BYTES TEXT GATE: opens NAME (BYTES long or more) for writing, "
            "queues a copy of BYTES from device:0 onto it and behind that one a copy "
            "of TEXT onto its first bytes, releases NAME; reports 'queued' at GATE, "
            "then holds (its copies end with its session)") {
  if (args.size() != 4) return 2;
  auto session = StepSession();
  if (!session) return 1;
  const RawCalls calls(*session);
  const std::uint64_t bytes = std::stoull(args[1]);
  const std::string& text = args[2];
  v1::Lease target;
  v1::Lease chain;
  v1::Lease written;
  grpc::Status status = calls.Open(args[0], v1::READ_WRITE, &target);
  if (status.ok()) status = calls.Create("mallory/chain", bytes, "device:0", &chain);
  if (status.ok()) {
    v1::CreateRequest create;
    create.set_name("mallory/text");
    create.set_size_bytes(text.size());
    status = session->Call(&v1::Memd::Stub::Create, create, &written);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", Refusal(status).c_str());
    return 1;
  }
  auto fd = session->TakeFd(written.handle().fd_seq());
  if (!fd.ok() || ::pwrite(fd->get(), text.data(), text.size(),
                           static_cast<off_t>(written.handle().offset())) !=
                      static_cast<ssize_t>(text.size())) {
    std::fprintf(stderr, "cannot write mallory/text\n");
    return 1;
  }
  std::uint64_t first = 0;
  std::uint64_t second = 0;
  status = calls.Copy(chain.lease_id(), target.lease_id(), bytes, &first);
  if (status.ok()) status = calls.Copy(written.lease_id(), target.lease_id(), text.size(), &second);
  if (status.ok()) status = calls.Release(target.lease_id());
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", Refusal(status).c_str());
    return 1;
  }
  return test::HoldAtGate(args[3], "queued\n") ? 0 : 3;
}

MEMD_ATTACK(fill_transfer_waits,
            "SESSIONS PER_SESSION REFUSALS BYTES GATE: in each session starts a copy "
            "of BYTES onto device:0, then PER_SESSION WaitTransfer calls of a minute "
            "on it; once REFUSALS of them have failed (or 30 s passed) reports "
            "'waiting W', 'refused R' and the first refusal at GATE, then holds the "
            "rest") {
  if (args.size() != 5) return 2;
  const int sessions = std::stoi(args[0]);
  const int per_session = std::stoi(args[1]);
  const std::size_t expected = std::stoul(args[2]);
  const std::uint64_t bytes = std::stoull(args[3]);
  std::vector<test::RawSession> held;
  WaitingCalls waiting;
  for (int s = 0; s < sessions; ++s) {
    auto raw = StepSession();
    if (!raw) return 1;
    held.push_back(std::move(*raw));
    const test::RawSession& session = held.back();
    const RawCalls steps(session);
    v1::Lease source;
    v1::Lease device;
    std::uint64_t transfer = 0;
    grpc::Status status = steps.Create(absl::StrCat("mallory/src/", s), bytes, "host", &source);
    if (status.ok()) {
      status = steps.Create(absl::StrCat("mallory/dst/", s), bytes, "device:0", &device);
    }
    if (status.ok()) status = steps.Copy(source.lease_id(), device.lease_id(), bytes, &transfer);
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", Refusal(status).c_str());
      return 1;
    }
    for (int i = 0; i < per_session; ++i) {
      waiting.Start(session, [&](grpc::ClientContext* context, WaitingCalls::Done done) {
        auto request = std::make_shared<v1::WaitTransferRequest>();
        request->set_transfer_id(transfer);
        request->set_wait_ms(60000);
        auto reply = std::make_shared<v1::TransferProgress>();
        session.stub->async()->WaitTransfer(
            context, request.get(), reply.get(),
            [request, reply, done](grpc::Status status) { done(status); });
      });
    }
  }
  return test::HoldAtGate(args[4], waiting.Report(expected)) ? 0 : 3;
}

MEMD_ATTACK(probe_private,
            "NAME: asks for NAME every way a client can (Stat, Open for reading and "
            "for writing, Unlink, OpenOrCreate of 1 byte); prints 'CALL CODE: "
            "message' per call") {
  if (args.size() != 1) return 2;
  auto session = StepSession();
  if (!session) return 1;
  const RawCalls calls(*session);
  auto print = [](const char* call, const grpc::Status& status) {
    std::printf("%s %s\n", call, Refusal(status).c_str());
  };
  v1::StatRequest stat;
  stat.set_name(args[0]);
  v1::BufferInfo info;
  print("Stat", session->Call(&v1::Memd::Stub::Stat, stat, &info));
  v1::Lease lease;
  print("OpenRead", calls.Open(args[0], v1::READ, &lease));
  print("OpenWrite", calls.Open(args[0], v1::READ_WRITE, &lease));
  v1::UnlinkRequest unlink;
  unlink.set_name(args[0]);
  v1::UnlinkReply unlinked;
  print("Unlink", session->Call(&v1::Memd::Stub::Unlink, unlink, &unlinked));
  v1::OpenOrCreateRequest either;
  either.mutable_create()->set_name(args[0]);
  either.mutable_create()->set_size_bytes(1);
  print("OpenOrCreate", session->Call(&v1::Memd::Stub::OpenOrCreate, either, &lease));
  session->Drain();
  return 0;
}

MEMD_ATTACK(show_stats,
            "PREFIX: creates PREFIX/own (4096 bytes) and keeps it, then prints what "
            "Stats tells it: 'daemon_wide D buffers B sessions S leases L waits W "
            "active A active_bytes N completed C memory_waits M' (M: the calls "
            "waiting for memory it is told of, every location together)") {
  if (args.size() != 1) return 2;
  auto session = StepSession();
  if (!session) return 1;
  v1::Lease own;
  if (grpc::Status made = RawCalls(*session).Create(args[0] + "/own", 4096, "host", &own);
      !made.ok()) {
    std::fprintf(stderr, "%s\n", Refusal(made).c_str());
    return 1;
  }
  v1::StatsReply stats;
  if (grpc::Status got = session->Call(&v1::Memd::Stub::Stats, v1::StatsRequest(), &stats);
      !got.ok()) {
    std::fprintf(stderr, "%s\n", Refusal(got).c_str());
    return 1;
  }
  unsigned long long memory_waits = 0;
  for (const v1::MemoryWaits& waits : stats.memory_waits()) memory_waits += waits.calls();
  std::printf("daemon_wide %d buffers %llu sessions %llu leases %llu waits %llu active %llu "
              "active_bytes %llu completed %llu memory_waits %llu\n",
              stats.daemon_wide() ? 1 : 0, static_cast<unsigned long long>(stats.buffers()),
              static_cast<unsigned long long>(stats.sessions()),
              static_cast<unsigned long long>(stats.leases()),
              static_cast<unsigned long long>(stats.waits()),
              static_cast<unsigned long long>(stats.transfers().active()),
              static_cast<unsigned long long>(stats.transfers().active_bytes()),
              static_cast<unsigned long long>(stats.transfers().completed()), memory_waits);
  return 0;
}

MEMD_ATTACK(show_holders,
            "NAME: opens NAME for reading and keeps the lease, then prints what Stat "
            "tells of who holds it: 'holder session S pid P uid U command C leases N' "
            "per holder listed, then 'unlisted U other_users O lease_count L', then "
            "'list_holders H' (holders a List entry carries)") {
  if (args.size() != 1) return 2;
  auto session = StepSession();
  if (!session) return 1;
  v1::Lease held;
  v1::StatRequest stat;
  stat.set_name(args[0]);
  v1::BufferInfo info;
  if (!Succeeded(RawCalls(*session).Open(args[0], v1::READ, &held)) ||
      !Succeeded(session->Call(&v1::Memd::Stub::Stat, stat, &info))) {
    return 1;
  }
  for (const v1::LeaseHolder& holder : info.holders().listed()) {
    std::printf("holder session %llu pid %u uid %u command %s leases %u\n",
                static_cast<unsigned long long>(holder.session_id()), holder.pid(), holder.uid(),
                holder.command().c_str(), holder.leases());
  }
  std::printf("unlisted %u other_users %u lease_count %u\n", info.holders().unlisted_leases(),
              info.holders().other_users_leases(), info.lease_count());
  v1::ListRequest list;
  list.set_prefix(args[0]);
  v1::ListReply listed;
  if (!Succeeded(session->Call(&v1::Memd::Stub::List, list, &listed))) return 1;
  int list_holders = 0;
  for (const v1::BufferInfo& entry : listed.buffers()) list_holders += entry.holders().listed_size();
  std::printf("list_holders %d\n", list_holders);
  return 0;
}

MEMD_ATTACK(list_unlinked,
            "PREFIX: prints each buffer List with include_unlinked shows under PREFIX, "
            "'NAME unlinked|named leases L' per line") {
  if (args.size() != 1) return 2;
  auto session = StepSession();
  if (!session) return 1;
  v1::ListRequest list;
  list.set_prefix(args[0]);
  list.set_include_unlinked(true);
  v1::ListReply listed;
  if (!Succeeded(session->Call(&v1::Memd::Stub::List, list, &listed))) return 1;
  for (const v1::BufferInfo& entry : listed.buffers()) {
    std::printf("%s %s leases %u\n", entry.name().c_str(),
                entry.unlinked() ? "unlinked" : "named", entry.lease_count());
  }
  return 0;
}

MEMD_ATTACK(unlink_expecting,
            "NAME ID: unlinks NAME only if it is buffer ID (UnlinkRequest.expected_id); "
            "prints 'OK' or the refusal") {
  if (args.size() != 2) return 2;
  std::uint64_t expected = 0;
  if (!absl::SimpleAtoi(args[1], &expected)) return 2;
  auto session = StepSession();
  if (!session) return 1;
  v1::UnlinkRequest unlink;
  unlink.set_name(args[0]);
  unlink.set_expected_id(expected);
  v1::UnlinkReply unlinked;
  const grpc::Status status = session->Call(&v1::Memd::Stub::Unlink, unlink, &unlinked);
  std::printf("%s\n", status.ok() ? "OK" : Refusal(status).c_str());
  return 0;
}

}  // namespace memd::hostile
