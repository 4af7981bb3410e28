#pragma once

// An attack that keeps what it took while the test checks that other users
// are unaffected: sessions, leases and waiting opens end with the attacker's
// process, so the process must stay until the test is done with it.
//
// The two sides meet at a gate, a directory with two FIFOs:
// - The test (HeldAttack) makes the gate, opens `report` for reading and
//   `release` for writing (O_RDWR, so nobody blocks on it), and starts
//   memd-hostile in a thread with the gate as its last argument.
// - The attack (HoldAtGate) opens `release`, writes its report into
//   `report` and closes it, then blocks reading `release`.
// - The test reads the report until the attack closes it (Report), checks
//   what it likes, and closes `release` (Release): the attack's read sees
//   the end of the file and the process exits, ending its sessions.
// Nothing waits on a clock but the deadlines that catch a broken attack.
// Header-only: memd-hostile uses HoldAtGate, tests use HeldAttack.

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace memd::test {

inline std::string GateReport(const std::string& gate) { return gate + "/report"; }
inline std::string GateRelease(const std::string& gate) { return gate + "/release"; }

// The attack's side: reports `report` and holds until the test releases
// (or dies). Returns false when the gate cannot be used.
inline bool HoldAtGate(const std::string& gate, const std::string& report) {
  const int release = ::open(GateRelease(gate).c_str(), O_RDONLY | O_CLOEXEC);
  if (release < 0) return false;
  const int out = ::open(GateReport(gate).c_str(), O_WRONLY | O_CLOEXEC);
  if (out < 0) return false;
  std::size_t done = 0;
  while (done < report.size()) {
    const ssize_t wrote = ::write(out, report.data() + done, report.size() - done);
    if (wrote <= 0) break;
    done += static_cast<std::size_t>(wrote);
  }
  ::close(out);
  char byte;
  while (::read(release, &byte, 1) > 0) {
  }
  ::close(release);
  return true;
}

}  // namespace memd::test

#ifndef MEMD_HOSTILE_SIDE_ONLY
#include "tests/support/hostile.h"

namespace memd::test {

/// The test's side: runs `memd-hostile COMMAND ARGS... GATE` as `uid` until
/// Release. Not thread-safe; one per attack.
class HeldAttack {
 public:
  // `gate` is a fresh path in a directory `uid` can search.
  HeldAttack(uid_t uid, const std::string& socket_dir, std::vector<std::string> args,
             const std::string& gate)
      : gate_(gate) {
    ::mkdir(gate_.c_str(), 0755);
    ::chmod(gate_.c_str(), 0755);
    for (const std::string& fifo : {GateReport(gate_), GateRelease(gate_)}) {
      ::mkfifo(fifo.c_str(), 0666);
      ::chmod(fifo.c_str(), 0666);  // Whatever the umask.
    }
    report_ = ::open(GateReport(gate_).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    release_ = ::open(GateRelease(gate_).c_str(), O_RDWR | O_CLOEXEC);
    args.push_back(gate_);
    thread_ = std::thread([this, uid, socket_dir, args] {
      result_ = RunHostile(uid, socket_dir, args, "", absl::Seconds(120));
      finished_ = true;
    });
  }
  ~HeldAttack() { Release(); }

  // What the attack reported once it held everything; empty when it ended
  // or `timeout` passed first (Release() then tells why).
  std::string Report(absl::Duration timeout = absl::Seconds(60)) {
    std::string report;
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      // Slices, so that an attack that died without reporting is noticed.
      pollfd readable{report_, POLLIN, 0};
      if (::poll(&readable, 1, 100) > 0) {
        char chunk[4096];
        const ssize_t got = ::read(report_, chunk, sizeof(chunk));
        if (got > 0) {
          report.append(chunk, static_cast<std::size_t>(got));
          continue;
        }
        // POLLHUP comes only once a writer has come and gone.
        if (readable.revents & POLLHUP) return report;
      }
      if (finished_) return report;
    }
    return report;
  }

  // Lets the attack go and waits for it; its result (exit code, output).
  const ProgramResult& Release() {
    if (release_ >= 0) {
      ::close(release_);
      release_ = -1;
    }
    if (thread_.joinable()) thread_.join();
    if (report_ >= 0) {
      ::close(report_);
      report_ = -1;
    }
    return result_;
  }

 private:
  std::string gate_;
  int report_ = -1;
  int release_ = -1;
  std::thread thread_;
  std::atomic<bool> finished_{false};
  ProgramResult result_;
};

}  // namespace memd::test
#endif
