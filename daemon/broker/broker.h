#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/opaque_ids.h"
#include "common/unix_socket.h"
#include "daemon/broker/advice.h"
#include "daemon/broker/buffer_journal.h"
#include "daemon/broker/capacity.h"
#include "daemon/broker/copy_pin.h"
#include "daemon/broker/copy_regions.h"
#include "daemon/broker/creating_names.h"
#include "daemon/broker/eviction.h"
#include "daemon/broker/memory_queue.h"
#include "daemon/broker/leaks.h"
#include "daemon/broker/replica_copier.h"
#include "daemon/broker/replica_set.h"
#include "daemon/broker/types.h"
#include "daemon/broker/uid_counts.h"
#include "daemon/broker/usage_ledger.h"
#include "daemon/broker/waiters.h"
#include "daemon/pool/pool.h"
#include "daemon/pool/pool_set.h"

namespace memd::broker {

/// The named-buffer registry: buffers by name, the leases that keep them
/// alive and the sessions that hold those leases.
///
/// Owns every buffer's memory (an allocation from the pools, which it
/// borrows and which must outlive it). A buffer's memory goes back to its
/// pool when it is unlinked (explicitly, or implicitly: ephemeral buffers and
/// never-sealed buffers when their last lease ends), no lease is left and
/// no copy reaches it any more (CopyPin): until then the buffer stays,
/// nameless and "parked", charged to its owner's quotas and buffer count
/// like any other. A parked buffer that copies still write is reported to
/// the freed-while-written hook, so that those copies can be cancelled:
/// nobody can read what they would write.
///
/// Keeps, for each session, the segment of every replayable handle (a legacy
/// CUDA IPC handle: ExportedHandle::replayable) granted to it, once per
/// segment, until the session ends: the client may open those bytes again
/// at any time, so the segment must stay where it is. The pool does not give
/// back or move a segment held so (Pool::Trim).
///
/// Counts what each uid holds against the per-uid limits (UidCounts) and
/// what each uid and session's buffers take against the byte quotas
/// (UsageLedger); waiting opens are Waiters'.
///
/// Thread-safe: one mutex guards the registry, its counts and its waiting
/// opens; pools are called outside it for allocations that may reach the
/// backend. What a call must do once the mutex is released (give memory back
/// to its pool, wake waiting opens, let go of segments) it collects in an
/// AfterUnlock, which WithLock runs after the lock scope ends.
///
/// Errors (each with a message that names the buffer, lease and numbers):
/// INVALID_ARGUMENT (bad name, size, mode, location), NOT_FOUND (unknown
/// name, unknown lease), ALREADY_EXISTS, PERMISSION_DENIED (mode forbids the
/// caller), FAILED_PRECONDITION (wrong state: not sealed yet, sealed already,
/// unlinked, read-only lease), RESOURCE_EXHAUSTED (limits, byte quotas,
/// pool),
/// UNAUTHENTICATED (the session is unknown or has ended), ABORTED
/// (OpenOrCreate lost a race with a create and unlink of the name: retry).
///
/// Replicas (docs/design.md, "Replicas"): a named buffer lives at its home
/// (where it was created) and may have one copy at each other location.
/// Each copy is a record of its own (its allocation, charge, pin and
/// leases; journaled as an unlinked buffer, so that a restart keeps a copy
/// only for the holders who re-claim it) that the home's ReplicaSet
/// decides about. An open at a location without a current copy starts a
/// fill through the ReplicaCopier and waits for it with every other opener
/// there; the copy is charged to the uid that asked for it. An unlink
/// orphans the copies: each goes when its last lease and copy do.
// The most lease ids one Reclaim names: what one call does under the
// broker's mutex, and its reply, stay small. libmemd asks 256 at a time.
inline constexpr std::uint64_t kMaxLeasesPerReclaim = 1024;
// Copies one buffer may have, its home included: more than a node has
// locations (host, pinned and its GPUs), so that only memory bounds them.
inline constexpr std::size_t kMaxReplicas = 64;

class Broker {
 public:
  Broker(pool::PoolSet& pools, BrokerLimits limits, const Clock& clock);
  ~Broker();

  // Registers a session for a connected peer. `token_digest` (SHA-256 of
  // the session's token; empty: none) goes to the journal, for the client
  // to re-claim its leases after a restart (Reclaim). Errors:
  // RESOURCE_EXHAUSTED (max_sessions_per_uid, max_sessions).
  absl::StatusOr<SessionId> StartSession(const PeerCredentials& peer,
                                         std::string command,
                                         const std::string& token_digest = {});

  // Releases every lease of the session and wakes its waiting opens (which
  // then fail with UNAUTHENTICATED). Unknown ids are ignored.
  void EndSession(SessionId session);

  // Creates a buffer and a READ_WRITE lease on it for the session. Charged
  // to the caller's uid and session what the pool sets aside for it
  // (Pool::AllocationBytes). While another Create or OpenOrCreate of the
  // name allocates, waits for it (holding the calling thread, for as long
  // as that allocation takes, counted as a waiting call) instead of
  // allocating a second buffer: then ALREADY_EXISTS if it named the
  // buffer, else it creates (creating_names.h). Errors: RESOURCE_EXHAUSTED
  // (max_buffers_per_uid, max_buffers, the byte quotas, max_leases_per_uid,
  // max_leases_per_session, the pool; the wait limits while it waits), and
  // as the class says.
  absl::StatusOr<Grant> Create(SessionId session, const CreateParams& params);

  // Opens a buffer: READ for sealed buffers, READ_WRITE for buffers still
  // being written. With an expected owner, a buffer owned by another uid is
  // PERMISSION_DENIED, checked after the read permission (so that it tells
  // nothing a refused reader could not learn anyway). Errors: RESOURCE_EXHAUSTED
  // (max_leases_per_uid, max_leases_per_session), and as the class says.
  absl::StatusOr<Grant> Open(SessionId session, const OpenParams& params);

  // Like Open with READ, but when the only obstacle is that the buffer does
  // not exist yet or is not sealed, registers `wake` under `watch` and
  // returns std::nullopt. `wake` runs once, on another thread, after the name
  // is sealed, or the session ends, or CancelWatch; the caller then tries
  // again (and meets the owner check then: a forged buffer sealed under the
  // name is PERMISSION_DENIED). `watch` ids come from NewWatchId(). Errors:
  // as Open, and RESOURCE_EXHAUSTED (max_waits_per_session,
  // max_waits_per_uid, max_waits).
  absl::StatusOr<std::optional<Grant>> OpenOrWatch(SessionId session,
                                                   const OpenParams& params,
                                                   WatchId watch,
                                                   std::function<void()> wake);

  // Creates the buffer when the name is free (a READ_WRITE grant with
  // created=true), else opens it READ like OpenOrWatch, with
  // params.expected_owner. An existing buffer the caller may not read is
  // PERMISSION_DENIED before anything else, so that it tells neither size
  // nor location; a readable one of another size or location is
  // FAILED_PRECONDITION.
  //
  // One buffer per name however many call at once: while another Create or
  // OpenOrCreate of the name allocates its memory (outside the mutex), this
  // call allocates nothing and waits for that one to end, then looks again
  // as if it had come after it: it opens what the other named (the checks
  // above, the seal wait), or, when the other failed (its allocation, or
  // its session ended meanwhile), creates the buffer itself or waits for
  // whichever caller got there first. Each caller's own refusals come from
  // its own try: a failed allocation is not passed on, since another uid
  // may be allowed what the first was not (quotas, fair share). With a
  // wake, that wait is a watch like a seal wait (std::nullopt, `wake` runs
  // when the other create ends); without one, the calling thread waits,
  // for as long as that allocation takes, counted as a waiting call.
  // Errors: as above, and RESOURCE_EXHAUSTED (max_waits_per_session,
  // max_waits_per_uid, max_waits) for such a wait.
  absl::StatusOr<std::optional<Grant>> OpenOrCreate(SessionId session,
                                                    const CreateParams& params,
                                                    WatchId watch,
                                                    std::function<void()> wake);

  // Like Create, but when the location stays full after what may give way
  // has (a LocationFull refusal), waits for memory instead of failing:
  // registers `wake` under `watch` and returns std::nullopt. `wake` runs
  // once, on another thread, when memory at the location was freed and
  // this create's turn came (MemoryQueue: uids take turns, first come
  // first served within one), or the session ends, or CancelWatch; the
  // caller then calls again with the same watch, which keeps its place
  // until the create succeeds or CancelWatch. `watch` from NewWatchId().
  // Errors: as Create, and RESOURCE_EXHAUSTED (max_waits_per_session,
  // max_waits_per_uid, max_waits, with the numbers).
  absl::StatusOr<std::optional<Grant>> CreateOrWait(SessionId session,
                                                    const CreateParams& params,
                                                    WatchId watch,
                                                    std::function<void()> wake);

  // OpenOrCreate that, when it would create and the location stays full,
  // waits for memory as CreateOrWait does (and for a seal as OpenOrCreate
  // does, when the name exists unsealed): std::nullopt with `wake`
  // registered under `watch` either way. Errors: as OpenOrCreate and
  // CreateOrWait.
  absl::StatusOr<std::optional<Grant>> OpenOrCreateOrWait(SessionId session,
                                                          const CreateParams& params,
                                                          WatchId watch,
                                                          std::function<void()> wake);

  // OpenOrWatch that, when the copy it would make at params.location
  // finds the location full after what may give way has, waits for memory
  // as CreateOrWait does, in the same queue, instead of failing: the copy
  // is charged to the opener like a create of its size. std::nullopt with
  // `wake` under `watch` while it waits for memory or for the copy. An
  // unlink of the name wakes it: it ends then (NOT_FOUND), or goes on for
  // the buffer the name stands for by then.
  // Errors: as OpenOrWatch and CreateOrWait.
  absl::StatusOr<std::optional<Grant>> OpenOrWaitForMemory(SessionId session,
                                                           const OpenParams& params,
                                                           WatchId watch,
                                                           std::function<void()> wake);

  // Whether `watch` waits for memory now (not for a seal): what an overdue
  // OpenOrCreate is told depends on it.
  bool WaitsForMemory(WatchId watch) const;

  // What a create that waited `wait` for memory in vain is told
  // (DEADLINE_EXCEEDED): what it asked, what is free at its location and
  // who holds it (per uid for root; the caller's own share and everyone
  // else's together for anyone else: what others hold is theirs).
  absl::Status NoRoomWithin(SessionId session, const CreateParams& params,
                            absl::Duration wait) const;
  // The same for a copy at params.location that waited in vain
  // (OpenOrWaitForMemory); the buffer's size only if the caller may open it.
  absl::Status NoRoomForCopyWithin(SessionId session, const OpenParams& params,
                                   absl::Duration wait) const;

  // Counts a WaitTransfer call of the session among its waiting calls,
  // with the waiting opens and under the same limits, until
  // CancelWatch(watch) or the session's end. `watch` from NewWatchId().
  // Errors: RESOURCE_EXHAUSTED (max_waits_per_session, max_waits_per_uid,
  // max_waits, with the numbers), UNAUTHENTICATED.
  absl::Status AddTransferWait(SessionId session, WatchId watch);

  WatchId NewWatchId();
  // Forgets a watch without running its callback. Returns false when the
  // callback has run or is about to (the wake won the race).
  bool CancelWatch(WatchId watch);

  // Seals the buffer of a READ_WRITE lease of the session: from then on no
  // byte of it changes through memd. FAILED_PRECONDITION, naming how many,
  // while copies may still write it (their last chunk has not left the
  // device): wait for them or cancel them, then seal; that refusal carries
  // the buffer (BufferCopiesStillWrite). Errors: also as the class says
  // (read-only lease, unlinked, sealed already).
  absl::StatusOr<BufferInfo> Seal(SessionId session, LeaseId lease);

  // Ends a lease of the session. Errors: NOT_FOUND (not held: released
  // already or never granted), UNAUTHENTICATED.
  absl::Status Release(SessionId session, LeaseId lease);

  // Resolves the two regions of a copy the session asks for into what the
  // transfer engine needs (copy_regions.h), under one lock, so that both
  // sides are of one moment. Errors, each with the numbers: INVALID_ARGUMENT
  // (a zero length, different lengths, a region past the end of its buffer
  // or overflowing, source and destination overlapping in one buffer),
  // NOT_FOUND (a lease this session does not hold: another session's is as
  // unknown as a made-up id), FAILED_PRECONDITION (a read-only lease or a
  // sealed buffer as destination), UNIMPLEMENTED (a backend whose memory
  // memd cannot reach), UNAUTHENTICATED.
  absl::StatusOr<CopyEnds> ResolveCopy(SessionId session, const CopyRegion& source,
                                       const CopyRegion& destination);

  // Removes a name (owner or root). Leased memory lives on until the last
  // lease ends.
  // With `expected_id` nonzero, only the buffer of that id (a name
  // re-created since the caller looked is FAILED_PRECONDITION, untouched).
  absl::Status Unlink(SessionId session, const std::string& name,
                      std::uint64_t expected_id = 0);

  // Buffers whose names start with `prefix` that the session may read,
  // ordered by name. With `include_unlinked`, also the buffers of such
  // names that were unlinked but still take memory (leased, or held by
  // copies or the grace period), each copy away from home that an unlink
  // left leased as a row of its own (info.unlinked; after the named buffer
  // of the same name). Errors: INVALID_ARGUMENT (prefix), UNAUTHENTICATED.
  absl::StatusOr<std::vector<BufferInfo>> List(SessionId session,
                                               const std::string& prefix,
                                               bool include_unlinked = false);

  // The named buffer, as List shows it, and who holds its leases
  // (BufferInfo::holders: the caller's own uid's sessions in full, other
  // uids' leases only counted, unless the caller is root). Errors:
  // INVALID_ARGUMENT (name), NOT_FOUND, PERMISSION_DENIED (may not read
  // it), UNAUTHENTICATED.
  absl::StatusOr<BufferInfo> Stat(SessionId session, const std::string& name);

  // Sessions of the caller's uid; all of them for root.
  absl::StatusOr<std::vector<SessionInfo>> Sessions(SessionId session);

  // What live buffers take per uid and location, by uid then location: the
  // caller's uid only, every uid for root (and for session 0, the daemon
  // itself). Errors: UNAUTHENTICATED.
  absl::StatusOr<std::vector<UidUsage>> Usage(SessionId session) const;

  BrokerCounts Counts() const;
  // Where the grace period after a recovery stands (daemon-wide: as the
  // recovery report, it is the daemon's).
  GraceCounts Grace() const;
  // What one uid holds now: the buffers it owns (parked ones included), its
  // sessions, the leases they hold and their waiting calls. The rest of
  // BrokerCounts is 0.
  BrokerCounts CountsOf(uid_t uid) const;
  // What pressure and quotas took back at each location since start
  // (BrokerCounts::pressure), daemon-wide whoever asks: it is the pools'.
  std::map<std::string, PressureCounts> Pressure() const;

  // Counts() and every uid's Usage(), read under one lock: what one metrics
  // scrape shows, all of one moment.
  BrokerSnapshot Snapshot() const;

  // Replaces the limits (a configuration reload). Takes effect for the next
  // request; nothing granted already is taken back.
  void SetLimits(const BrokerLimits& limits);

  // Reports every buffer's changes to `journal` from now on (nullptr: to
  // none). Borrowed: must outlive the broker or be replaced first. Set
  // before the daemon serves, after Adopt.
  void SetJournal(BufferJournal* journal);

  // Takes back buffers a previous memd left (durable recovery): each owned
  // by the uid it had, charged to it (with no session) and counted, under
  // its id, name and state, with no lease. Buffers a holder may still come
  // back for (unsealed, ephemeral or unlinked ones) wait until EndGrace.
  // Before any session starts. On an error nothing is adopted and every
  // allocation goes back to its pool. Errors: FAILED_PRECONDITION
  // (sessions or buffers exist already), INVALID_ARGUMENT (an id or a
  // linked name twice, id 0, a location no pool serves).
  //
  // `sessions` and `leases` are what the previous memd's sessions held: each
  // lease waits, held by its dead session, for a client of that session's
  // uid that knows its token to re-claim it (Reclaim) until EndGrace, and
  // its buffer waits with it. Errors as above, and INVALID_ARGUMENT for a
  // lease of a session or buffer not adopted, an id twice or 0.
  struct AdoptedBuffer {
    BufferInfo info;
    pool::Allocation allocation;
  };
  struct AdoptedSession {
    SessionId id = 0;
    uid_t uid = 0;
    std::string token_digest;
  };
  struct AdoptedLease {
    LeaseId id = 0;
    SessionId session = 0;
    BufferId buffer = 0;
    Access access = Access::kRead;
  };
  absl::Status Adopt(std::vector<AdoptedBuffer> buffers,
                     std::vector<AdoptedSession> sessions = {},
                     std::vector<AdoptedLease> leases = {});

  // Moves to `session`, under the same ids and access, the adopted leases
  // in `leases` that a dead session held whose uid is the caller's and whose
  // token digest is `previous_token_digest`. Each is answered apart: OK
  // (held by `session` now), NOT_FOUND (no such lease of an earlier session
  // of the caller's with that token: never held, another uid's, claimed
  // already, or the grace period is over; a guess learns nothing more),
  // RESOURCE_EXHAUSTED (max_leases_per_session, max_leases_per_uid: it
  // stays to be claimed). Errors: UNAUTHENTICATED (the session),
  // INVALID_ARGUMENT (more ids than max_leases_per_session or
  // kMaxLeasesPerReclaim, an id twice).
  struct ReclaimOutcome {
    LeaseId lease = 0;
    absl::Status status;
  };
  absl::StatusOr<std::vector<ReclaimOutcome>> Reclaim(SessionId session,
                                                      const std::string& previous_token_digest,
                                                      const std::vector<LeaseId>& leases);

  // Ends the grace period after a recovery: adopted leases nobody
  // re-claimed end, and adopted buffers that wait for their holders and
  // hold no lease now go, as if their last lease had ended (unsealed and
  // ephemeral ones are unlinked, unlinked ones freed). Returns how many
  // buffers went. Later calls do nothing.
  std::uint64_t EndGrace();

  // Removes the copy of `name` at `at`: the buffer's owner, root or the uid
  // the copy is charged to. Returns the buffer as it is then. Errors:
  // NOT_FOUND (no such name, or no copy there), PERMISSION_DENIED,
  // FAILED_PRECONDITION (the home, a leased or filling copy, the only
  // current one), INVALID_ARGUMENT (a location this node lacks).
  absl::StatusOr<BufferInfo> DropReplica(SessionId session, const std::string& name,
                                         const Location& at);

  // A writer publishes its bytes: the copy its READ_WRITE lease maps
  // becomes the buffer's new generation, every other copy stale, and the
  // stale copies nobody holds are refreshed now (charged to the caller's
  // transfer admission). Returns the buffer. Errors: NOT_FOUND (lease),
  // FAILED_PRECONDITION (read-only lease, sealed or unlinked buffer).
  absl::StatusOr<BufferInfo> Sync(SessionId session, LeaseId lease);

  // Recommendations from the recorded usage (advice.h) for the buffers
  // whose names start with `prefix`: the caller's own, every buffer for
  // root. Errors: UNAUTHENTICATED, INVALID_ARGUMENT (prefix).
  absl::StatusOr<std::vector<Recommendation>> Advise(SessionId session,
                                                     const std::string& prefix);
  // The thresholds Advise judges by (a configuration reload).
  void SetAdviceRules(const AdviceRules& rules);

  // The leak report (leaks.h, broker_leaks.cc): named buffers, leases and
  // sessions that look forgotten under `rules`, each attributed to a uid
  // (the buffer's owner, the lease's or session's holder); the caller sees
  // only its own uid's, root every uid's. At most kMaxLeaksPerReport, the
  // first in FindLeaks' order; `omitted` counts the rest. Errors:
  // UNAUTHENTICATED, INVALID_ARGUMENT (rules out of range, with the numbers:
  // ValidateLeakRules).
  absl::StatusOr<LeakReport> Leaks(SessionId session, const LeakRules& rules);

  // What makes copies (nullptr: none; opens away from the home are then
  // FAILED_PRECONDITION). Borrowed: must outlive the broker or be replaced
  // first.
  void SetReplicaCopier(ReplicaCopier* copier);

  // Called, outside the broker's mutex, with each buffer freed while copies
  // may still write it (the daemon cancels them: transfer::Engine::
  // CancelWritesTo). Empty: nothing is called. Must not call the broker.
  void SetFreedWhileWritten(std::function<void(BufferId)> hook);
  // Called, outside the mutex, with the device buffers freed that a live
  // session opened with OpenParams::notify_freed: the daemon tells its
  // client, which lets go of its import. nullptr: nobody is told.
  void SetFreedNotice(
      std::function<void(SessionId, const std::vector<BufferId>&)> hook);

  // Called outside the broker's mutex with one line for each buffer memory
  // pressure evicted and each copy it demoted: which, where, its bytes and
  // whose (the daemon logs them at a bounded rate). Empty: nothing is
  // called. Must not call the broker.
  void SetPressureLog(std::function<void(const std::string&)> log);

 private:
  struct Buffer {
    BufferInfo info;
    pool::Pool* pool = nullptr;
    pool::Allocation allocation;
    Charge charge;  // What the ledger holds for it.
    // What copies hold of it. A buffer freed while claims live stays here,
    // allocated and charged, until the last lets go (CopiesLetGo).
    std::shared_ptr<CopyPin> pin;
    bool parked = false;  // Freed, kept for its copies.
    // Adopted from a previous memd and not yet re-claimed: it waits for
    // EndGrace before its lack of leases counts.
    bool awaiting_holders = false;
    // A copy of the named buffer `home` at info.location; `home` is 0 once
    // an unlink orphaned it (it goes with its last lease and copy).
    bool is_copy = false;
    BufferId home = 0;
    // Homes: the state of every copy, the home's own included, and the
    // records of the copies away from home.
    std::optional<ReplicaSet> replicas;
    absl::flat_hash_map<Location, BufferId> copies;
    // Copies: the open whose fill last made it current; its own open there
    // is no copy avoided (usage).
    WatchId filled_for = 0;
    // Its creation or its last lease: eviction takes the least recently
    // used first.
    absl::Time last_used;
    // Sessions to tell when it is freed (Session::notify_freed, the other
    // side): bounded by the sessions alive.
    absl::flat_hash_set<SessionId> notify_on_free;
    // The leases on this record (leases_ by buffer), so that Stat finds a
    // buffer's holders without walking every lease of the daemon.
    absl::flat_hash_set<LeaseId> leases;
  };
  // A fill the broker decided on under its mutex, started after it.
  struct FillStart {
    BufferId home = 0;
    FillTicket ticket;
    SessionId session = 0;  // Whose transfer admission it counts against.
    uid_t uid = 0;
    WatchId starter = 0;  // The open that started it; 0: a Seal or Sync.
    CopyEnds ends;
  };
  // An open that needs a copy where the buffer has none: memory to
  // allocate outside the mutex, then AddCopyLocked.
  struct NewCopy {
    BufferId home = 0;
    Location at;
    pool::Pool* pool = nullptr;
    pool::Domain domain;
    std::uint64_t size = 0;
    uid_t asker = 0;  // The opener, who pays for it.
  };
  struct Lease {
    SessionId session = 0;
    BufferId buffer = 0;
    Access access = Access::kRead;
    uid_t uid = 0;  // The holder's, for max_leases_per_uid.
    // When it was granted (re-claimed after a restart: when memd adopted
    // it; the journal keeps no grant times), for the leak report.
    absl::Time granted;
  };
  struct Session {
    PeerCredentials peer;
    std::string command;
    absl::Time started;
    absl::flat_hash_set<LeaseId> leases;
    // Segments of replayable handles granted to the session, by segment id:
    // held until it ends, since the client may open the handle any time.
    absl::flat_hash_map<std::uint64_t, pool::SegmentHold> replayable;
    // Device buffers it opened with OpenParams::notify_freed that live: it
    // hears when each is freed. Bounded by the buffers alive.
    absl::flat_hash_set<BufferId> notify_freed;
  };
  // What to free and whom to wake once the mutex is released: a pool may
  // reach the backend, and a wake retries an open, which takes the mutex.
  // Filled under the lock; Run() once after it, by WithLock only.
  struct AfterUnlock {
    std::vector<std::pair<pool::Pool*, std::unique_ptr<Buffer>>> freed;
    std::vector<std::function<void()>> wakes;
    // Buffers freed while copies still write them, for the hook
    // (SetFreedWhileWritten), and the hook itself.
    std::vector<BufferId> freed_while_written;
    std::function<void(BufferId)> on_freed_while_written;
    // Segments an ended session held (Session::replayable); let go last.
    std::vector<pool::SegmentHold> let_go;
    // Buffers freed that sessions asked to hear of, by session, and the
    // hook that tells them (SetFreedNotice).
    absl::flat_hash_map<SessionId, std::vector<BufferId>> freed_notices;
    std::function<void(SessionId, const std::vector<BufferId>&)> on_freed_notice;
    // What memory pressure took (MakeRoomLocked), for the pressure log.
    std::vector<std::string> pressure_lines;
    std::function<void(const std::string&)> on_pressure;
    // Fills to hand to the copier, and the broker that finishes them.
    std::vector<FillStart> fills;
    Broker* broker = nullptr;
    void Wake(std::vector<std::function<void()>> more);
    // Gives the memory back, starts the fills, then wakes, then lets go,
    // in that order.
    void Run() &&;
    bool empty() const {
      return freed.empty() && wakes.empty() && let_go.empty() &&
             freed_while_written.empty() && fills.empty() && pressure_lines.empty() &&
             freed_notices.empty();
    }
    // A filled AfterUnlock that was never run is a bug: asserted.
    ~AfterUnlock();
  };

  // Runs body(AfterUnlock&) with mu_ held, then releases mu_ and runs what
  // the body collected; returns what the body returned. The only way to
  // obtain an AfterUnlock, so that nothing collected can be left behind or
  // run under the lock. Calls that never free or wake take a plain lock.
  template <typename Body>
  auto WithLock(Body body) ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<Session*> FindSessionLocked(SessionId session)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The session's lease. Errors: UNAUTHENTICATED, NOT_FOUND.
  absl::StatusOr<Lease*> FindLeaseLocked(SessionId session, LeaseId lease)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks name, size, mode and location; returns the pool.
  absl::StatusOr<pool::Pool*> ValidateCreate(const CreateParams& params) const;
  // Registers a new buffer around `allocation` (freed through `after` on
  // error) and grants the caller a READ_WRITE lease.
  absl::StatusOr<Grant> CreateWithAllocationLocked(SessionId session,
                                                   const CreateParams& params,
                                                   pool::Pool* pool,
                                                   pool::Allocation allocation,
                                                   AfterUnlock& after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Open under the lock. Returns std::nullopt when it would wait (and then
  // registers `wake` if given). A fill it starts goes to `after` (nullptr:
  // it may start none); a copy it needs where the buffer has no memory yet
  // goes to `need` (nullptr: refused), and std::nullopt comes back.
  absl::StatusOr<std::optional<Grant>> OpenLocked(
      SessionId session, Session& caller, const OpenParams& params,
      WatchId watch, std::function<void()>* wake, AfterUnlock* after = nullptr,
      std::optional<NewCopy>* need = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Serves an open at a location (the home or a copy) of a buffer the
  // caller may open: a grant, a wait, a fill or a NewCopy (OpenLocked).
  absl::StatusOr<std::optional<Grant>> OpenAtLocked(
      SessionId session, Session& caller, Buffer& home, const OpenParams& params,
      WatchId watch, std::function<void()>* wake, AfterUnlock* after,
      std::optional<NewCopy>* need) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Registers the copy `need` asked for around `allocation` (freed through
  // `after` when the buffer changed meanwhile) and starts its fill; then
  // the caller waits for it. Errors: as Create's admission.
  absl::Status AddCopyLocked(SessionId session, const NewCopy& need,
                             pool::Allocation allocation, WatchId watch,
                             std::function<void()>& wake, AfterUnlock& after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the fill `ticket` began of `destination` (a record of `home`)
  // from the copy at ticket.source in `after`.
  void QueueFillLocked(Buffer& home, Buffer& destination, FillTicket ticket,
                       SessionId session, uid_t uid, WatchId starter,
                       AfterUnlock& after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts the stale copies of `home` nobody holds refreshing.
  void RefreshStaleLocked(Buffer& home, SessionId session, uid_t uid, AfterUnlock& after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Outside the mutex: hands a fill to the copier.
  void StartFill(FillStart fill) ABSL_LOCKS_EXCLUDED(mu_);
  // The copier's end of a fill: the copy becomes current or goes, and
  // whoever waits on the name tries again.
  void FinishFill(BufferId home, const FillTicket& ticket, WatchId starter,
                  SessionId session, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // The record of `home`'s copy at `at` (the home itself at its location).
  Buffer* RecordAtLocked(Buffer& home, const Location& at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The named buffer a record belongs to: itself for a home, nullptr for an
  // orphaned copy.
  Buffer* HomeOfLocked(Buffer& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A lease more (or fewer) on `record`, in its home's ReplicaSet.
  void CountLeaseLocked(Buffer& record, Access access, bool added)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Leases on the buffer at every location.
  std::uint32_t TotalLeasesLocked(const Buffer& home) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Cuts a copy loose from its buffer (an unlink, a drop, a failed first
  // fill): it goes when nothing holds it any more.
  void OrphanLocked(Buffer& copy, AfterUnlock& after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The fill's end under the mutex: FinishFill's, or a fill that could
  // not even be handed over.
  void SettleFillLocked(BufferId home, const FillTicket& ticket, WatchId starter,
                        SessionId session, const absl::Status& status, AfterUnlock& after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One end of a fill: the whole of `record`, claimed for the copy.
  absl::StatusOr<CopyEnd> FillEndLocked(Buffer& record, bool destination)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies of clients that may still write the buffer at any of its copies
  // (what keeps it from being sealed); fills are not among them.
  int ClientWritersLocked(const Buffer& home) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the home's own copy holds the current generation.
  static bool HomeCurrentLocked(const Buffer& home);
  // What Stat shows of a home: its info with every copy and the state.
  BufferInfo ViewLocked(const Buffer& home) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Who holds the leases of `home` and its copies, as `caller` may know it
  // (BufferInfo::holders).
  LeaseHolders HoldersLocked(const Session& caller, const Buffer& home) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Grant> GrantLocked(SessionId session, Session& holder,
                                    Buffer& buffer, Access access)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same into `grant`, where the caller keeps it: an open builds its
  // grant in the result it returns, since every move of a grant moves the
  // buffer's details field by field (issue 28, target 4). `grant` is
  // unchanged on error. Errors: GrantLocked's.
  absl::Status GrantIntoLocked(SessionId session, Session& holder, Buffer& buffer,
                               Access access, Grant& grant) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One side of a copy: the lease (NOT_FOUND), its buffer's bounds, its
  // memory and a hold on its segment.
  absl::StatusOr<CopyEnd> CopyEndLocked(SessionId session, const CopyRegion& region,
                                        CopySide side) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `journal`: false where the session's end covers the lease's.
  void ReleaseLocked(LeaseId lease, AfterUnlock& after, bool journal = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnlinkLocked(Buffer& buffer, AfterUnlock& after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FreeIfUnusedLocked(BufferId id, AfterUnlock& after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a buffer with no lease left becomes: ephemeral and unsealed ones
  // are unlinked, unlinked ones freed (unless copies still reach them).
  void LastLeaseEndedLocked(Buffer& buffer, AfterUnlock& after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells the journal, if any, what the buffer is now.
  void JournalLocked(const Buffer& buffer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells the journal, if any, that `session` holds the grant's lease.
  void JournalLeaseLocked(const Grant& grant, SessionId session)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The last copy claim on a buffer went (CopyPin's let_go): a parked buffer
  // is freed now. Runs on the thread that dropped the claim, never under mu_.
  void CopiesLetGo(BufferId id) ABSL_LOCKS_EXCLUDED(mu_);
  Buffer* FindNamedLocked(const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks the buffer counts (per uid, global) and the byte quotas for a
  // buffer the session would create, whose allocation takes `bytes`. With
  // `after`, a create that would take its uid over its quota at the
  // location first takes back that uid's own unheld evictable data there
  // (MakeRoomLocked for the uid): a quota is the uid's own limit, so only
  // its own data gives way.
  absl::Status AdmitLocked(SessionId session, const Session& caller,
                           const CreateParams& params, std::uint64_t bytes,
                           AfterUnlock* after = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks what Open checks of an existing buffer before granting: the read
  // (or write) permission, then the expected owner.
  absl::Status MayOpenLocked(const Session& caller, const BufferInfo& buffer,
                             const OpenParams& params) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  BrokerCounts CountsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every uid's usage, or only `only`'s, by uid then location.
  std::vector<UidUsage> UsageLocked(std::optional<uid_t> only) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the leak report judges (named buffers, leases, sessions) of every
  // uid, or only of what `only` owns or holds.
  LeakFacts LeakFactsLocked(std::optional<uid_t> only) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  pool::PoolSet& pools_;
  BrokerLimits limits_ ABSL_GUARDED_BY(mu_);
  LimitRejections rejections_ ABSL_GUARDED_BY(mu_);
  UsageLedger usage_ ABSL_GUARDED_BY(mu_);
  const Clock& clock_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, BufferId> names_ ABSL_GUARDED_BY(mu_);
  // Every buffer with a name or a lease.
  absl::flat_hash_map<BufferId, std::unique_ptr<Buffer>> buffers_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<LeaseId, Lease> leases_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<SessionId, Session> sessions_ ABSL_GUARDED_BY(mu_);
  // Under the registry's mutex: a wait must be registered in the same step
  // that found the name missing or unsealed, or a seal could fall between.
  Waiters waiters_ ABSL_GUARDED_BY(mu_);
  // Names whose Create or OpenOrCreate allocates now, and who waits for
  // each (broker.cc, creating_names.h): one allocation per name at a time.
  CreatingNames creating_ ABSL_GUARDED_BY(mu_);
  // A create of `name` is in flight (creating_): registers `wake` under
  // `watch` (a watch like a seal wait's) to run when it ends. Without a
  // wake, registers one of its own and returns the notification it sets,
  // for the caller to wait on outside the mutex before it looks again; with
  // one, nullptr. Errors: Waiters::Add's (RESOURCE_EXHAUSTED).
  absl::StatusOr<std::shared_ptr<absl::Notification>> WaitForCreationLocked(
      SessionId session, uid_t uid, const std::string& name, WatchId watch,
      const std::function<void()>& wake) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The create of `name` in flight ended (named, or failed): whoever waited
  // for it is woken through `after` and looks again.
  void EndCreationLocked(const std::string& name, AfterUnlock& after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Create's and OpenOrCreate's allocation, outside the mutex: the pool's,
  // then under pressure (AllocateUnderPressure).
  absl::StatusOr<pool::Allocation> AllocateForCreate(pool::Pool& pool,
                                                     const CreateParams& params,
                                                     const pool::Domain& domain, uid_t asker)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Sessions, owned buffers and leases per uid.
  UidCounts uid_counts_ ABSL_GUARDED_BY(mu_);
  // Ids that say nothing of how many others took (common/opaque_ids.h).
  OpaqueIds buffer_ids_ ABSL_GUARDED_BY(mu_);
  OpaqueIds lease_ids_ ABSL_GUARDED_BY(mu_);
  OpaqueIds session_ids_ ABSL_GUARDED_BY(mu_);
  std::function<void(BufferId)> on_freed_while_written_ ABSL_GUARDED_BY(mu_);
  std::function<void(SessionId, const std::vector<BufferId>&)> on_freed_notice_
      ABSL_GUARDED_BY(mu_);
  BufferJournal* journal_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool in_grace_ ABSL_GUARDED_BY(mu_) = false;
  // Until EndGrace: the previous memd's sessions, and the leases they held
  // that nobody has re-claimed (Adopt, Reclaim). New ids skip theirs.
  absl::flat_hash_map<SessionId, AdoptedSession> dead_sessions_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<LeaseId, AdoptedLease> reclaimable_ ABSL_GUARDED_BY(mu_);
  // When Adopt ran: the grant time of the leases re-claimed from it.
  absl::Time adopted_at_ ABSL_GUARDED_BY(mu_);
  ReplicaCopier* copier_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Opens and copies per named buffer, for Stat and Advise.
  UsageTracker tracker_ ABSL_GUARDED_BY(mu_);
  // The same, daemon-wide since start, for metrics (BrokerCounts).
  std::uint64_t replica_copies_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::uint64_t> replica_bytes_copied_ ABSL_GUARDED_BY(mu_);
  std::uint64_t copies_avoided_ ABSL_GUARDED_BY(mu_) = 0;
  AdviceRules advice_rules_ ABSL_GUARDED_BY(mu_);
  const absl::Time started_;
  // Fills that failed, by the waiting open that started them: its next try
  // ends with the failure instead of starting another. Dropped with the
  // watch (CancelWatch) or the session.
  struct FailedFill {
    SessionId session = 0;
    absl::Status status;
  };
  absl::flat_hash_map<WatchId, FailedFill> failed_fills_ ABSL_GUARDED_BY(mu_);

  // Under memory pressure (broker_eviction.cc), kept together.
  //
  // Allocates `size` at `pool` for `asker` after `refusal` (the pool's
  // first answer): when it is RESOURCE_EXHAUSTED, demotes and evicts
  // unleased data there (eviction.h's order; other uids' only while the
  // asker stays within its fair share) and tries again, a few rounds at
  // most. Errors: the pool's last refusal, with why nothing more could be
  // taken; other refusals as they came.
  absl::StatusOr<pool::Allocation> AllocateUnderPressure(pool::Pool& pool, std::uint64_t size,
                                                         const pool::Domain& domain,
                                                         absl::Status refusal, uid_t asker)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Takes back at least `need` bytes at `at` (PlanEviction): the victims'
  // memory goes to `after`. Returns the bytes taken. `quota_of`: only that
  // uid's data, to keep it within its quota (else: a full location, any
  // uid's; with `requester`, others' only within its fair share).
  // Errors: RESOURCE_EXHAUSTED (PlanEviction's: not enough unleased,
  // retained data there), and nothing is taken then.
  absl::StatusOr<std::uint64_t> MakeRoomLocked(
      const Location& at, std::uint64_t need, AfterUnlock& after,
      std::optional<uid_t> quota_of = std::nullopt,
      std::optional<EvictionRequester> requester = std::nullopt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // NOT_FOUND for `name`, saying when and why it was evicted if it was,
  // lately, and the caller could have read it.
  absl::Status NoBufferLocked(const Session& caller, const std::string& name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A name pressure evicted, for NoBufferLocked: until the name is created
  // again, kEvictedNameMemory has passed or kMaxEvictedNames newer ones
  // came.
  // Creates waiting for memory (CreateOrWait): each also a watch in
  // waiters_ (its limits, its wake), queued in memory_queue_'s order, and
  // remembered with its place until it succeeds or is cancelled.
  struct MemoryWait {
    SessionId session = 0;
    Location at;
    std::uint64_t arrival = 0;
  };
  absl::flat_hash_map<WatchId, MemoryWait> memory_waits_ ABSL_GUARDED_BY(mu_);
  MemoryQueue memory_queue_ ABSL_GUARDED_BY(mu_);
  // How many creates wait, read without the lock by MemoryFreed's callers.
  std::atomic<std::size_t> memory_waiting_{0};
  // Memory was freed at `at` (AfterUnlock::Run, after the pools took it
  // back): wakes the waiting creates there whose turn came.
  void MemoryFreed(const std::vector<Location>& at) ABSL_LOCKS_EXCLUDED(mu_);
  // What the pool at `at` can still hand out under its limit; unlimited
  // pools: as much as anyone asks.
  std::uint64_t RoomLocked(const Location& at) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // NoRoomWithin's message, for `what` ("buffer", "a copy of buffer").
  absl::Status NoRoomLocked(SessionId session, absl::string_view what,
                            const CreateParams& params, absl::Duration wait) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets a waiting create (done, cancelled, its session gone).
  void ForgetMemoryWaitLocked(WatchId watch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // CreateOrWait, OpenOrCreateOrWait and OpenOrWaitForMemory: `attempt`
  // (given the wake, for an attempt that waits for something else) until it
  // succeeds, fails other than LocationFull, or waits; else queues the watch
  // for the bytes the refusal names at the full location. `copy_of`: the
  // name of the buffer a waiting copy is of, whose unlink (or seal) wakes
  // it; empty for creates.
  absl::StatusOr<std::optional<Grant>> TryOrWaitForMemory(
      SessionId session, WatchId watch, std::function<void()> wake,
      absl::FunctionRef<absl::StatusOr<std::optional<Grant>>(const std::function<void()>&)>
          attempt,
      const std::string& copy_of = "") ABSL_LOCKS_EXCLUDED(mu_);
  struct Evicted {
    BufferInfo info;  // As it was: who could read it.
    absl::Time at;
    std::uint64_t bytes = 0;
    // Evicted to keep this uid within its quota, not for a full location.
    std::optional<uid_t> quota_of = std::nullopt;
  };
  static constexpr std::size_t kMaxEvictedNames = 4096;
  static constexpr absl::Duration kEvictedNameMemory = absl::Hours(1);
  absl::flat_hash_map<std::string, Evicted> evicted_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<std::string, absl::Time>> evicted_order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, PressureCounts> pressure_ ABSL_GUARDED_BY(mu_);
  std::function<void(const std::string&)> pressure_log_ ABSL_GUARDED_BY(mu_);

  // Automatic placement (broker_placement.cc), kept together.
 public:
  // Resolves `location = auto` (CreateParams::auto_location): chooses the
  // location among the node's pools the caller listed as mappable, from the
  // size, the hint, the rules and each pool's free bytes (its idle bytes
  // plus what the capacity source reports free, within the pool's limit),
  // and sets params.placement to the rule that chose it. `may_open`
  // (OpenOrCreate): when the name exists at a location the caller may map,
  // that location, without asking for free memory. Other params come back
  // as they are. Errors: RESOURCE_EXHAUSTED (nothing the caller may map has
  // room: each location's free bytes), INVALID_ARGUMENT (nothing mappable).
  absl::StatusOr<CreateParams> ResolvePlacement(const CreateParams& params,
                                                bool may_open = false) const;
  // For the next creates (a configuration reload).
  void SetPlacementRules(const PlacementRules& rules);
  // Borrowed; nullptr (the default): the pool limits are the only bound.
  // Must outlive the broker or be replaced first.
  void SetCapacitySource(const CapacitySource* source);
  // NUMA placement of the next creates (numa_placement.h); nullptr (the
  // default) binds nothing and refuses no request, as a machine of one
  // node with numa off would.
  void SetNumaPlacement(std::shared_ptr<const NumaPlacement> placement);

 private:
  // The domain a create by `session` allocates in: its owner, group and
  // mode, and the NUMA node (NumaPlacement::Choose, read outside mu_: it
  // may read /proc). Errors: FindSessionLocked's, Choose's.
  absl::StatusOr<pool::Domain> CreateDomain(SessionId session, const CreateParams& params);

  PlacementRules placement_rules_ ABSL_GUARDED_BY(mu_);
  const CapacitySource* capacity_source_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::shared_ptr<const NumaPlacement> numa_placement_ ABSL_GUARDED_BY(mu_);
};

// The buffer a Seal refusal is about when copies may still write it, so
// that the caller can name its own copies; nullopt for any other status.
std::optional<BufferId> BufferCopiesStillWrite(const absl::Status& status);

// Whether a create refused with `status` was refused because its location
// is full and nothing there could give way (CreateOrWait waits then).
bool LocationFull(const absl::Status& status);

// Whether an open refused with `status` was refused only because it had
// no wake to wait with: for a copy being made, or one to make, there.
bool OpenWouldWait(const absl::Status& status);

}  // namespace memd::broker
