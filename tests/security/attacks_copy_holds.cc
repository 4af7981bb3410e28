// Attack steps through copies that outlive what they name (issue 22): memory
// kept by a copy after its buffer was freed (finding 1), bytes written into
// a buffer behind its seal (finding 2), WaitTransfer calls held in the
// daemon (finding 4), and what a refusal tells of another's buffer
// (finding 6). Against a daemon on the fake CUDA driver's slow link
// (tests/security/slow_copies.h), a copy to or from device:0 is the chain
// that keeps the copies queued behind it unfinished.
//
// Each prints (or reports at its gate, tests/security/held_attack.h) what
// it got and the first refusal as "CODE: message".

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tests/security/attacks.h"
#define MEMD_HOSTILE_SIDE_ONLY
#include "tests/security/held_attack.h"
#include "tests/support/raw_session.h"

namespace memd::hostile {
namespace {

std::string Refusal(const grpc::Status& status) {
  return absl::StrCat(
      absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())), ": ",
      status.error_message());
}

// A raw session's calls, each returning the daemon's status and keeping no
// descriptor it sends.
class Calls {
 public:
  explicit Calls(const test::RawSession& session) : session_(session) {}

  grpc::Status Create(const std::string& name, std::uint64_t size, const std::string& location,
                      v1::Lease* lease) const {
    v1::CreateRequest create;
    create.set_name(name);
    create.set_size_bytes(size);
    create.set_location(location);
    grpc::Status status = session_.Call(&v1::Memd::Stub::Create, create, lease);
    session_.Drain();
    return status;
  }

  grpc::Status Open(const std::string& name, v1::Access access, v1::Lease* lease) const {
    v1::OpenRequest open;
    open.set_name(name);
    open.set_access(access);
    grpc::Status status = session_.Call(&v1::Memd::Stub::Open, open, lease);
    session_.Drain();
    return status;
  }

  // `length` bytes from `from` (offset 0) to `to` at `to_offset`.
  grpc::Status Copy(std::uint64_t from, std::uint64_t to, std::uint64_t length,
                    std::uint64_t* transfer) const {
    v1::CopyRequest copy;
    copy.mutable_source()->set_lease_id(from);
    copy.mutable_source()->set_length(length);
    copy.mutable_destination()->set_lease_id(to);
    copy.mutable_destination()->set_length(length);
    v1::CopyReply reply;
    grpc::Status status = session_.Call(&v1::Memd::Stub::Copy, copy, &reply);
    *transfer = reply.transfer_id();
    return status;
  }

  grpc::Status Release(std::uint64_t lease) const {
    v1::ReleaseRequest release;
    release.set_lease_id(lease);
    v1::ReleaseReply released;
    return session_.Call(&v1::Memd::Stub::Release, release, &released);
  }

 private:
  const test::RawSession& session_;
};

// The chain: FEED (host) copied onto CHAIN (device:0), `bytes` over the
// slow link. Copies that write CHAIN's first bytes, or read them, wait
// behind it.
grpc::Status StartChain(const Calls& calls, std::uint64_t bytes, v1::Lease* chain) {
  v1::Lease feed;
  grpc::Status status = calls.Create("mallory/feed", bytes, "host", &feed);
  if (status.ok()) status = calls.Create("mallory/chain", bytes, "device:0", chain);
  std::uint64_t transfer = 0;
  if (status.ok()) status = calls.Copy(feed.lease_id(), chain->lease_id(), bytes, &transfer);
  return status;
}

}  // namespace

MEMD_ATTACK(park_behind_chain,
            "CHAIN_BYTES PARK_BYTES COUNT GATE: starts a chain of CHAIN_BYTES onto "
            "device:0, then up to COUNT times creates a host buffer of PARK_BYTES, "
            "queues a 1-byte copy from it behind the chain and releases it (so that "
            "only the copy keeps it); reports 'parked K' and the first refusal at "
            "GATE, then holds") {
  if (args.size() != 4) return 2;
  auto session = test::RawSession::Connect(SocketDir());
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
    return 1;
  }
  const Calls calls(*session);
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
  auto session = test::RawSession::Connect(SocketDir());
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
    return 1;
  }
  const Calls calls(*session);
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
  const int expected = std::stoi(args[2]);
  const std::uint64_t bytes = std::stoull(args[3]);
  struct Call {
    grpc::ClientContext context;
    v1::WaitTransferRequest request;
    v1::TransferProgress reply;
  };
  std::mutex mu;
  std::condition_variable changed;
  int done = 0;
  int refused = 0;
  std::string first_refusal;
  std::vector<test::RawSession> held;
  std::vector<std::unique_ptr<Call>> calls;
  for (int s = 0; s < sessions; ++s) {
    auto raw = test::RawSession::Connect(SocketDir());
    if (!raw.ok()) {
      std::fprintf(stderr, "%s\n", raw.status().ToString().c_str());
      return 1;
    }
    held.push_back(std::move(*raw));
    const Calls steps(held.back());
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
      auto call = std::make_unique<Call>();
      call->context.AddMetadata("memd-session", held.back().token);
      call->request.set_transfer_id(transfer);
      call->request.set_wait_ms(60000);
      held.back().stub->async()->WaitTransfer(
          &call->context, &call->request, &call->reply, [&](grpc::Status status) {
            std::lock_guard<std::mutex> lock(mu);
            ++done;
            if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
              ++refused;
              if (first_refusal.empty()) first_refusal = Refusal(status);
            }
            changed.notify_all();
          });
      calls.push_back(std::move(call));
    }
  }
  std::string report;
  {
    std::unique_lock<std::mutex> lock(mu);
    changed.wait_for(lock, std::chrono::seconds(30), [&] { return refused >= expected; });
    report = absl::StrCat("waiting ", calls.size() - done, "\nrefused ", refused, "\n",
                          first_refusal, "\n");
  }
  const bool held_ok = test::HoldAtGate(args[4], report);
  for (auto& call : calls) call->context.TryCancel();
  std::unique_lock<std::mutex> lock(mu);
  changed.wait(lock, [&] { return done == static_cast<int>(calls.size()); });
  return held_ok ? 0 : 3;
}

MEMD_ATTACK(probe_private,
            "NAME: asks for NAME every way a client can (Stat, Open for reading and "
            "for writing, Unlink, OpenOrCreate of 1 byte); prints 'CALL CODE: "
            "message' per call") {
  if (args.size() != 1) return 2;
  auto session = test::RawSession::Connect(SocketDir());
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
    return 1;
  }
  const Calls calls(*session);
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

}  // namespace memd::hostile
