// Attack steps on replicas (issue 25): opens at a location that make the
// daemon copy a buffer, writes through a reader's copy, prefetch floods.
// Each prints what it got and the refusal as "CODE: message".

#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/security/attack_steps.h"
#include "tests/security/attacks.h"
#include "tests/support/raw_session.h"

namespace memd::hostile {
namespace {

grpc::Status OpenAt(const test::RawSession& session, const std::string& name,
                    const std::string& location, v1::Lease* lease) {
  v1::OpenRequest open;
  open.set_name(name);
  open.set_access(v1::READ);
  open.set_location(location);
  grpc::Status status = session.Call(&v1::Memd::Stub::Open, open, lease);
  session.Drain();
  return status;
}

std::string Outcome(const grpc::Status& status) {
  return status.ok() ? std::string("OK") : Refusal(status);
}

}  // namespace

MEMD_ATTACK(open_at,
            "NAME LOCATION: opens NAME read-only at LOCATION (the daemon copies it "
            "there); prints 'open OK' or 'open CODE: message'") {
  if (args.size() != 2) return 2;
  auto session = StepSession();
  if (!session) return 1;
  v1::Lease lease;
  std::printf("open %s\n", Outcome(OpenAt(*session, args[0], args[1], &lease)).c_str());
  return 0;
}

MEMD_ATTACK(write_replica,
            "NAME LOCATION: opens NAME read-only at LOCATION, then has the daemon "
            "copy a host buffer of its own into that lease; prints 'open ...' and "
            "'copy ...'") {
  if (args.size() != 2) return 2;
  auto session = StepSession();
  if (!session) return 1;
  RawCalls calls(*session);
  v1::Lease replica;
  grpc::Status opened = OpenAt(*session, args[0], args[1], &replica);
  std::printf("open %s\n", Outcome(opened).c_str());
  if (!opened.ok()) return 0;
  v1::Lease own;
  grpc::Status created = calls.Create(absl::StrCat("mallory/source/", ::getpid()),
                                      replica.buffer().size_bytes(), "host", &own);
  if (!created.ok()) {
    std::fprintf(stderr, "Create: %s\n", Refusal(created).c_str());
    return 1;
  }
  std::uint64_t transfer = 0;
  std::printf("copy %s\n",
              Outcome(calls.Copy(own.lease_id(), replica.lease_id(),
                                 replica.buffer().size_bytes(), &transfer))
                  .c_str());
  return 0;
}

MEMD_ATTACK(prefetch_flood,
            "PREFIX COUNT SIZE LOCATION: creates COUNT sealed host buffers PREFIX/i of "
            "SIZE bytes, then prefetches each to LOCATION without waiting; prints "
            "'prefetches K' (those admitted) and the first refusal") {
  if (args.size() != 4) return 2;
  const int count = std::stoi(args[1]);
  const std::uint64_t size = std::stoull(args[2]);
  auto session = StepSession();
  if (!session) return 1;
  for (int i = 0; i < count; ++i) {
    if (grpc::Status made = CreateSealed(*session, absl::StrCat(args[0], "/", i), size, 0600);
        !made.ok()) {
      std::fprintf(stderr, "Create %d: %s\n", i, Refusal(made).c_str());
      return 1;
    }
  }
  int admitted = 0;
  std::string refusal;
  for (int i = 0; i < count; ++i) {
    v1::PrefetchRequest prefetch;
    prefetch.set_name(absl::StrCat(args[0], "/", i));
    prefetch.set_location(args[3]);
    v1::BufferInfo info;
    grpc::Status status = session->Call(&v1::Memd::Stub::Prefetch, prefetch, &info);
    if (status.ok()) {
      ++admitted;
    } else if (refusal.empty()) {
      refusal = Refusal(status);
    }
  }
  std::printf("prefetches %d\n%s\n", admitted, refusal.c_str());
  return 0;
}

MEMD_ATTACK(open_drop_loop,
            "NAME SIZE LOCATION ROUNDS: creates NAME, a sealed host buffer of SIZE "
            "bytes (pinned), then ROUNDS times opens it at LOCATION (a copy there), "
            "releases it and drops the copy; prints 'copies K' (the opens that got "
            "their copy) and the first refusal") {
  if (args.size() != 4) return 2;
  const std::uint64_t size = std::stoull(args[1]);
  const int rounds = std::stoi(args[3]);
  auto session = StepSession();
  if (!session) return 1;
  if (grpc::Status made = CreateSealed(*session, args[0], size, 0600); !made.ok()) {
    std::fprintf(stderr, "Create: %s\n", Refusal(made).c_str());
    return 1;
  }
  RawCalls calls(*session);
  int copies = 0;
  std::string refusal;
  for (int i = 0; i < rounds; ++i) {
    v1::Lease lease;
    grpc::Status opened = OpenAt(*session, args[0], args[2], &lease);
    if (!opened.ok()) {
      if (refusal.empty()) refusal = Refusal(opened);
      continue;
    }
    ++copies;
    (void)calls.Release(lease.lease_id());
    v1::DropReplicaRequest drop;
    drop.set_name(args[0]);
    drop.set_location(args[2]);
    v1::BufferInfo info;
    (void)session->Call(&v1::Memd::Stub::DropReplica, drop, &info);
  }
  std::printf("copies %d\n%s\n", copies, refusal.c_str());
  return 0;
}

}  // namespace memd::hostile
