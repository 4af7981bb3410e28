// Attack steps on other sessions' transfers and leases through the copy
// calls (tests/security/transfer_privacy_test.cc), and what listing them
// shows (tests/security/what_others_learn_test.cc).

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "memd/v1/memd.grpc.pb.h"
#include "tests/security/attack_steps.h"
#include "tests/security/attacks.h"
#define MEMD_HOSTILE_SIDE_ONLY
#include "tests/security/held_attack.h"
#include "tests/support/raw_session.h"

namespace memd::hostile {

MEMD_ATTACK(probe_transfers,
            "ID...: in a session of its own, asks for the progress of (at once "
            "and waiting 100 ms), and cancels, every transfer id given; "
            "prints 'ID CODE CODE CODE' per id (gRPC status code numbers)") {
  if (args.empty()) return 2;
  auto session = StepSession();
  if (!session) return 1;
  for (const std::string& given : args) {
    const std::uint64_t id = std::stoull(given);
    v1::WaitTransferRequest wait;
    wait.set_transfer_id(id);
    v1::TransferProgress progress;
    grpc::Status now = session->Call(&v1::Memd::Stub::WaitTransfer, wait, &progress);
    wait.set_wait_ms(100);
    grpc::Status waited = session->Call(&v1::Memd::Stub::WaitTransfer, wait, &progress);
    v1::CancelTransferRequest cancel;
    cancel.set_transfer_id(id);
    grpc::Status cancelled = session->Call(&v1::Memd::Stub::CancelTransfer, cancel, &progress);
    std::printf("%llu %d %d %d\n", static_cast<unsigned long long>(id),
                static_cast<int>(now.error_code()), static_cast<int>(waited.error_code()),
                static_cast<int>(cancelled.error_code()));
  }
  return 0;
}

MEMD_ATTACK(copy_leases,
            "SIZE ID...: creates a buffer of SIZE bytes of its own and copies "
            "from, then into, every lease id given with it; prints 'ID CODE "
            "CODE' per id (gRPC status code numbers)") {
  if (args.size() < 2) return 2;
  auto session = StepSession();
  if (!session) return 1;
  const std::uint64_t size = std::stoull(args[0]);
  v1::CreateRequest create;
  create.set_name("mallory/bait");
  create.set_size_bytes(size);
  v1::Lease mine;
  if (grpc::Status made = session->Call(&v1::Memd::Stub::Create, create, &mine); !made.ok()) {
    std::fprintf(stderr, "create: %s\n", made.error_message().c_str());
    return 1;
  }
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::uint64_t id = std::stoull(args[i]);
    v1::CopyRequest out;
    out.mutable_source()->set_lease_id(id);
    out.mutable_source()->set_length(size);
    out.mutable_destination()->set_lease_id(mine.lease_id());
    out.mutable_destination()->set_length(size);
    v1::CopyReply reply;
    grpc::Status stolen = session->Call(&v1::Memd::Stub::Copy, out, &reply);
    v1::CopyRequest in = out;
    in.mutable_source()->set_lease_id(mine.lease_id());
    in.mutable_destination()->set_lease_id(id);
    grpc::Status planted = session->Call(&v1::Memd::Stub::Copy, in, &reply);
    std::printf("%llu %d %d\n", static_cast<unsigned long long>(id),
                static_cast<int>(stolen.error_code()), static_cast<int>(planted.error_code()));
  }
  return 0;
}

MEMD_ATTACK(list_transfers,
            "PREFIX GATE: creates PREFIX/src (32 MiB, host) and PREFIX/dst (32 MiB, "
            "device:0), copies the one into the other, and reports at GATE what "
            "ListTransfers shows it then: a line 'transfer ID SOURCE@LOCATION -> "
            "DESTINATION@LOCATION uid UID' per copy, then 'omitted N'; holds its "
            "session (and so the copy) until released") {
  if (args.size() != 2) return 2;
  auto session = StepSession();
  if (!session) return 1;
  constexpr std::uint64_t kBytes = std::uint64_t{32} << 20;
  const RawCalls calls(*session);
  v1::Lease source;
  v1::Lease destination;
  std::uint64_t transfer = 0;
  for (grpc::Status step : {calls.Create(args[0] + "/src", kBytes, "host", &source),
                            calls.Create(args[0] + "/dst", kBytes, "device:0", &destination),
                            calls.Copy(source.lease_id(), destination.lease_id(), kBytes,
                                       &transfer)}) {
    if (!step.ok()) {
      std::fprintf(stderr, "%s\n", Refusal(step).c_str());
      return 1;
    }
  }
  v1::ListTransfersReply listed;
  if (grpc::Status got = session->Call(&v1::Memd::Stub::ListTransfers,
                                       v1::ListTransfersRequest(), &listed);
      !got.ok()) {
    std::fprintf(stderr, "%s\n", Refusal(got).c_str());
    return 1;
  }
  std::string report;
  for (const v1::TransferInfo& info : listed.transfers()) {
    absl::StrAppend(&report, "transfer ", info.progress().transfer_id(), " ", info.source_name(),
                    "@", info.source_location(), " -> ", info.destination_name(), "@",
                    info.destination_location(), " uid ", info.uid(), "\n");
  }
  absl::StrAppend(&report, "omitted ", listed.omitted(), "\n");
  return test::HoldAtGate(args[1], report) ? 0 : 3;
}

}  // namespace memd::hostile
