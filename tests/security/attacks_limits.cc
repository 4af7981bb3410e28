// Attack steps on the daemon's limits: one uid taking every session,
// buffer, lease or waiting open it can, and a quota that counted the bytes
// asked for rather than the memory taken (issue 9, findings 6 and 7).
//
// Each prints (or reports at its gate, tests/security/held_attack.h) how
// much it got and the first refusal as "CODE: message".

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tests/security/attack_steps.h"
#include "tests/security/attacks.h"
#define MEMD_HOSTILE_SIDE_ONLY
#include "tests/security/held_attack.h"
#include "tests/support/raw_session.h"

namespace memd::hostile {

MEMD_ATTACK(fill_sessions,
            "GATE: opens sessions until refused; reports 'sessions K' and the "
            "refusal at GATE, then holds them") {
  if (args.size() != 1) return 2;
  std::vector<test::RawSession> held;
  std::string refusal;
  for (int i = 0; i < 100000; ++i) {
    auto session = test::RawSession::Connect(SocketDir());
    if (!session.ok()) {
      refusal = Refusal(session.status());
      break;
    }
    held.push_back(std::move(*session));
  }
  return test::HoldAtGate(args[0], absl::StrCat("sessions ", held.size(), "\n",
                                                   refusal, "\n"))
             ? 0
             : 3;
}

MEMD_ATTACK(fill_buffers,
            "PREFIX SIZE COUNT: creates and seals up to COUNT persistent "
            "buffers PREFIX/i of SIZE bytes until refused; prints 'buffers K' "
            "and the refusal") {
  if (args.size() != 3) return 2;
  const std::uint64_t size = std::stoull(args[1]);
  const int count = std::stoi(args[2]);
  auto raw = test::RawSession::Connect(SocketDir());
  if (!raw.ok()) {
    std::printf("buffers 0\n%s\n", Refusal(raw.status()).c_str());
    return 1;
  }
  int created = 0;
  std::string refusal;
  for (; created < count; ++created) {
    grpc::Status status =
        CreateSealed(*raw, absl::StrCat(args[0], "/", created), size, 0600);
    if (!status.ok()) {
      refusal = Refusal(status);
      break;
    }
  }
  std::printf("buffers %d\n%s\n", created, refusal.c_str());
  return 0;
}

MEMD_ATTACK(fill_leases,
            "NAME SESSIONS GATE: publishes NAME, then in each of SESSIONS "
            "sessions opens it until refused; reports 'leases K' and the last "
            "refusal at GATE, then holds them") {
  if (args.size() != 3) return 2;
  const int sessions = std::stoi(args[1]);
  std::vector<test::RawSession> held;
  int leases = 0;
  std::string refusal;
  for (int s = 0; s < sessions; ++s) {
    auto raw = test::RawSession::Connect(SocketDir());
    if (!raw.ok()) {
      refusal = Refusal(raw.status());
      break;
    }
    if (s == 0) {
      if (grpc::Status made = CreateSealed(*raw, args[0], 1, 0600); !made.ok()) {
        refusal = Refusal(made);
        break;
      }
    }
    v1::OpenRequest open;
    open.set_name(args[0]);
    open.set_access(v1::READ);
    for (;;) {
      v1::Lease lease;
      grpc::Status status = raw->Call(&v1::Memd::Stub::Open, open, &lease);
      raw->Drain();
      if (!status.ok()) {
        refusal = Refusal(status);
        break;
      }
      ++leases;
    }
    held.push_back(std::move(*raw));
  }
  return test::HoldAtGate(args[2],
                             absl::StrCat("leases ", leases, "\n", refusal, "\n"))
             ? 0
             : 3;
}

// The two fill_*waits steps: in each of SESSIONS sessions, PER_SESSION
// calls that `start` begins (the i-th of session s), then the report at
// GATE once REFUSALS of them failed; holds the rest until released.
namespace {

using StartWait = std::function<void(const test::RawSession&, int s, int i,
                                     grpc::ClientContext*, WaitingCalls::Done)>;

int FillWaits(const Args& args, const StartWait& start) {
  if (args.size() != 4) return 2;
  const int sessions = std::stoi(args[0]);
  const int per_session = std::stoi(args[1]);
  const std::size_t expected = std::stoul(args[2]);
  std::vector<test::RawSession> held;
  WaitingCalls waiting;
  std::string no_session;
  for (int s = 0; s < sessions; ++s) {
    auto raw = test::RawSession::Connect(SocketDir());
    if (!raw.ok()) {
      no_session = Refusal(raw.status());
      break;
    }
    held.push_back(std::move(*raw));
    const test::RawSession& session = held.back();
    for (int i = 0; i < per_session; ++i) {
      waiting.Start(session, [&](grpc::ClientContext* context, WaitingCalls::Done done) {
        start(session, s, i, context, std::move(done));
      });
    }
  }
  std::string report = waiting.Report(expected);
  if (!no_session.empty()) absl::StrAppend(&report, no_session, "\n");
  return test::HoldAtGate(args[3], report) ? 0 : 3;
}

}  // namespace

MEMD_ATTACK(fill_waits,
            "SESSIONS PER_SESSION REFUSALS GATE: in each session starts "
            "PER_SESSION opens that wait 10 minutes for names nobody makes; "
            "once REFUSALS of them have failed (or 30 s passed) reports "
            "'waiting W', 'refused R' and the first refusal at GATE, then "
            "holds the rest") {
  return FillWaits(args, [](const test::RawSession& session, int s, int i,
                            grpc::ClientContext* context, WaitingCalls::Done done) {
    auto request = std::make_shared<v1::OpenRequest>();
    request->set_name(absl::StrCat("never/made/", s, "/", i));
    request->set_wait_timeout_ms(600000);
    auto reply = std::make_shared<v1::Lease>();
    session.stub->async()->Open(context, request.get(), reply.get(),
                                [request, reply, done](grpc::Status status) { done(status); });
  });
}

MEMD_ATTACK(fill_memory_waits,
            "SESSIONS PER_SESSION REFUSALS GATE: in each session starts "
            "PER_SESSION 1 MiB host creates that wait 10 minutes for memory; "
            "once REFUSALS of them have failed (or 30 s passed) reports "
            "'waiting W', 'refused R' and the first refusal at GATE, then "
            "holds the rest") {
  return FillWaits(args, [](const test::RawSession& session, int s, int i,
                            grpc::ClientContext* context, WaitingCalls::Done done) {
    auto request = std::make_shared<v1::CreateRequest>();
    request->set_name(absl::StrCat("waits/for/room/", s, "/", i));
    request->set_size_bytes(1 << 20);
    request->set_location("host");
    request->set_wait_for_memory_ms(600000);
    auto reply = std::make_shared<v1::Lease>();
    session.stub->async()->Create(context, request.get(), reply.get(),
                                  [request, reply, done](grpc::Status status) { done(status); });
  });
}

MEMD_ATTACK(fill_copy_waits,
            "SESSIONS PER_SESSION REFUSALS GATE: in each session starts "
            "PER_SESSION opens of shared/copy-source at host whose copies wait "
            "10 minutes for memory; once REFUSALS of them have failed (or 30 s "
            "passed) reports 'waiting W', 'refused R' and the first refusal at "
            "GATE, then holds the rest") {
  return FillWaits(args, [](const test::RawSession& session, int s, int i,
                            grpc::ClientContext* context, WaitingCalls::Done done) {
    auto request = std::make_shared<v1::OpenRequest>();
    request->set_name("shared/copy-source");
    request->set_location("host");
    request->set_wait_for_memory_ms(600000);
    auto reply = std::make_shared<v1::Lease>();
    session.stub->async()->Open(context, request.get(), reply.get(),
                                [request, reply, done](grpc::Status status) { done(status); });
  });
}

}  // namespace memd::hostile
