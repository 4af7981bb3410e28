"""What memd reports, as frozen dataclasses (libmemd's structs, field by field).

Times are float seconds since the Unix epoch (as time.time()), durations float
seconds. The binding builds these with keyword arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

__all__ = [
    "BufferInfo", "ReplicaInfo", "SizeClassStats", "PoolStats", "DeviceInfo", "TransferStats",
    "DurabilityStats", "DaemonStats", "SessionInfo", "UidUsage", "Recommendation", "TrimmedPool", "TransferProgress",
]


@dataclass(frozen=True)
class ReplicaInfo:
    """One copy of a buffer (BufferInfo.replicas)."""
    location: str           # "host", "pinned", "device:N".
    state: str              # "current", "stale" (kept for its holders), "filling".
    generation: int
    readers: int
    writers: int
    bytes: int              # What it takes where it lives,
    charged_uid: int        # charged to this uid.


@dataclass(frozen=True)
class LeaseHolder:
    """One session's leases on a buffer at one location with one access
    (BufferInfo.holders)."""
    session_id: int
    pid: int
    uid: int
    command: str            # The process name memd read when it connected.
    location: str           # The copy they map: the home or a replica.
    access: str             # "read" or "read_write".
    leases: int
    since: float            # When the oldest was granted (seconds since the epoch).


@dataclass(frozen=True)
class LeaseHolders:
    """Who holds a buffer's leases, as far as this user may know (Client.stat
    only): its own uid's sessions in full (every uid's for root), at most 64,
    and other users' leases only counted."""
    listed: Tuple[LeaseHolder, ...] = ()
    unlisted_leases: int = 0       # Of holders past the 64 listed.
    other_users_leases: int = 0


@dataclass(frozen=True)
class BufferInfo:
    """What the daemon says about a buffer (Client.stat, Buffer.info)."""
    name: str
    id: int                 # Unique for the daemon's lifetime.
    size: int
    location: str           # "host", "pinned", "device:N".
    owner_uid: int
    owner_gid: int
    mode: int
    state: str              # "creating" or "sealed".
    persistent: bool        # False: ephemeral (gone with its last lease).
    lease_count: int
    unlinked: bool
    created: float
    sealed: Optional[float]
    creator_pid: int
    attrs: Dict[str, str] = field(default_factory=dict)
    # location="auto": which rule chose `location`, with its numbers; "" for
    # a named location (and in Client.list(), which does not carry it).
    placement: str = ""
    # Client.stat, list, prefetch, drop_replica and Buffer.sync: every copy
    # (host, pinned, then devices), the state in unified-memory words
    # ("host_only", "device_only", "synchronized", "host_dirty",
    # "device_dirty", "mixed"), the content's generation and the last copy
    # that failed ("" none). `location` is the home; in a Buffer's info,
    # where that lease's copy lives (and these are empty).
    replicas: Tuple[ReplicaInfo, ...] = ()
    sync_state: str = ""
    generation: int = 0
    fill_failure: str = ""
    # "pinned", "demotable" or "evictable" (create(retention=)); "" in
    # Client.list(), which does not carry it.
    retention: str = ""
    # The NUMA node its pages were bound to (create(numa=)); -1 when they
    # were not, and in Client.list(), which does not carry it.
    numa_node: int = -1
    # Client.stat only: who holds its leases (LeaseHolders).
    holders: LeaseHolders = field(default_factory=LeaseHolders)


@dataclass(frozen=True)
class SizeClassStats:
    bytes: int
    allocations: int
    cached: int


@dataclass(frozen=True)
class PoolStats:
    location: str
    reserved_bytes: int
    used_bytes: int
    free_bytes: int
    peak_reserved_bytes: int
    peak_used_bytes: int
    hit_count: int
    miss_count: int
    largest_free_block_bytes: int
    fragmentation: float
    segments: int
    scrubbed_bytes: int
    trimmed_bytes: int
    limit_bytes: int
    size_classes: Tuple[SizeClassStats, ...] = ()
    # What memory pressure and quotas took back here since start.
    evictions: int = 0
    evicted_bytes: int = 0
    demotions: int = 0
    demoted_bytes: int = 0


@dataclass(frozen=True)
class DeviceInfo:
    ordinal: int
    uuid: str
    name: str
    total_bytes: int
    free_bytes: int
    vmm: bool
    posix_fd: bool
    handle_type: str        # "vmm_fd" or "ipc" (CUDA), "level_zero_ipc".
    healthy: bool
    health_error: str
    api: str                # "cuda" or "level_zero".
    pci_address: str        # "dddd:bb:dd.f"; "" where the driver cannot say.
    ipc: bool               # Level Zero: memory passes between processes.
    # Defaults: what an older libmemd, which does not say, means.
    has_free: bool = False  # The driver reports free memory (CUDA; not Level Zero 1.4).
    memd_bytes: int = 0     # What memd's pool holds of the device.
    # Used but not memd's: other processes, drivers' contexts, and memory memd
    # gave back that clients' imports still hold (0 without has_free).
    outside_memd_bytes: int = 0


@dataclass(frozen=True)
class MemoryWaits:
    """Creates waiting for memory at one location (DaemonStats.memory_waits)."""
    location: str
    calls: int
    bytes: int              # What they ask for together.


@dataclass(frozen=True)
class TransferStats:
    active: int
    active_bytes: int
    completed: int
    bytes: int
    failed: int
    retries: int
    rejected: int


@dataclass(frozen=True)
class DurabilityStats:
    """Whether buffers outlive the daemon, and what its start took back."""
    recording: bool
    not_recording: str      # Why not, when not; "" while recording.
    generation: int         # 1 from nothing; 0 from a daemon too old to say.
    recovered: bool
    recovered_at: float     # 0.0 unless recovered.
    recovery: float         # Seconds recovery took.
    adopted_segments: int
    adopted_buffers: int
    adopted_bytes: int
    lost_buffers: int
    lost_segments: int      # All stored when the previous state was unreadable.
    in_grace: bool          # Leases may be re-claimed; awaited buffers stay, unlinked too.
    awaiting_holders: int   # Adopted buffers waiting for their holders now.
    reclaimable_leases: int


@dataclass(frozen=True)
class DaemonStats:
    version: str
    backend: str
    pools: Tuple[PoolStats, ...]
    buffers: int
    sessions: int
    leases: int
    metrics_address: str
    started: float
    devices: Tuple[DeviceInfo, ...]
    waits: int
    transfers: TransferStats
    # True for root; else buffers, sessions, leases, waits and transfers are
    # the caller's uid's own.
    daemon_wide: bool
    durability: DurabilityStats
    # Among waits, calls waiting for memory (creates, copies) by location (only where some
    # wait).
    memory_waits: Tuple[MemoryWaits, ...] = ()


@dataclass(frozen=True)
class SessionInfo:
    id: int
    pid: int
    uid: int
    gid: int
    command: str
    lease_count: int
    started: float
    created_bytes: int


@dataclass(frozen=True)
class UidUsage:
    uid: int
    location: str
    bytes: int
    buffers: int
    quota_bytes: int        # 0: no quota.


@dataclass(frozen=True)
class Recommendation:
    subject: str            # A buffer name, or a prefix ending in "/".
    action: str             # "prefetch", "move", "drop_replica", "unlink".
    locations: Tuple[str, ...]
    evidence: str           # The numbers behind it, in words.
    bytes: int              # To copy (prefetch, move) or free (the others).


@dataclass(frozen=True)
class Leak:
    """One entry of the leak report (Client.leaks())."""
    uid: int                # Whose: the buffer's owner, the lease's or session's holder.
    kind: str               # "never_opened", "unsealed_idle", "idle_lease", "many_leases".
    subject: str            # A buffer name, "lease N on NAME", "session N (command)".
    bytes: int              # What the buffer or lease takes; 0 for many_leases.
    age: float              # Seconds since creation or grant; 0 for many_leases.
    pid: int                # The creator or holder; 0 where memd does not know it.
    evidence: str           # The numbers, in words.


@dataclass(frozen=True)
class LeakReport:
    leaks: Tuple[Leak, ...]  # By uid, then kind, then oldest first; at most 4096.
    omitted: int             # How many more the daemon did not send.


@dataclass(frozen=True)
class TrimmedPool:
    location: str
    released_bytes: int
    # How much the GPU driver's free memory rose across the trim: less than
    # released_bytes while clients' imports hold what memd gave back. None
    # where the driver cannot say (host pools).
    driver_freed_bytes: Optional[int] = None


@dataclass(frozen=True)
class TransferProgress:
    """Where a copy stands (Transfer.progress())."""
    id: int
    state: str              # "queued", "running", "done", "failed", "cancelled".
    bytes_done: int
    bytes_total: int
    direction: str          # "h2h", "h2d", "d2h", "d2d".
    path: str               # "cpu", "staged", "direct", "device", "peer_staged", "".
    device: int             # memd's ordinal of the GPU moving it; -1 host to host.
    retries: int
    error: Optional[Exception]  # What ended a failed or cancelled copy (a memd.Error).
    elapsed: float

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed", "cancelled")


@dataclass(frozen=True)
class TransferInfo:
    """A copy queued or running now, and whose it is (Client.transfers())."""
    progress: TransferProgress  # state "queued" or "running".
    priority: str               # "critical", "normal", "background".
    # The buffers by name (as when the copy started), the location of the
    # copy of each it reads or writes, and where its range starts.
    source_name: str
    source_location: str
    source_offset: int
    destination_name: str
    destination_location: str
    destination_offset: int
    age: float                  # Seconds since it was asked for.
    session_id: int
    pid: int                    # 0 (and no command) once its session ended.
    uid: int
    command: str


@dataclass(frozen=True)
class TransferList:
    transfers: Tuple[TransferInfo, ...]  # This user's (every user's for root), oldest first.
    omitted: int                         # How many more the daemon did not send (past 1000).
