"""libmemd's answers as memd's dataclasses (memd/_types.py): BufferInfo from
the C struct, the reports (stats, sessions, usage, trim, advice, leaks, transfer progress,
listed transfers) from the JSON documents the C API returns (memctl --json's fields)."""

from __future__ import annotations

import ctypes
import dataclasses
from typing import Any, Dict, List

from . import _capi
from ._errors import error_for_code
from ._types import (BufferInfo, DaemonStats, DeviceInfo, DurabilityStats, Leak, LeakReport,
                     LeaseHolder, LeaseHolders, MemoryWaits, PoolStats, Recommendation,
                     ReplicaInfo, SessionInfo, SizeClassStats, TransferInfo, TransferList,
                     TransferProgress, TransferStats, TrimmedPool, UidUsage)


def _make(cls: Any, fields: Dict[str, Any]) -> Any:
    """cls(**fields), without the fields a newer libmemd added that this
    package does not know yet."""
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in known})


def seconds(unix_ns: int) -> float:
    return unix_ns / 1e9


def _replica(replica: _capi.Replica) -> ReplicaInfo:
    return ReplicaInfo(
        location=_capi.text(replica.location), state=_capi.text(replica.state),
        generation=replica.generation, readers=replica.readers, writers=replica.writers,
        bytes=replica.bytes, charged_uid=replica.charged_uid)


def buffer_info(info: _capi.BufferInfo, placement: str = "", retention: str = "",
                numa_node: int = -1) -> BufferInfo:
    return BufferInfo(
        name=_capi.text(info.name), id=info.id, size=info.size,
        location=_capi.text(info.location), owner_uid=info.owner_uid,
        owner_gid=info.owner_gid, mode=info.mode,
        state="sealed" if info.sealed else "creating", persistent=not info.ephemeral,
        lease_count=info.lease_count, unlinked=bool(info.unlinked),
        created=seconds(info.created_unix_ns),
        sealed=seconds(info.sealed_unix_ns) if info.sealed else None,
        creator_pid=info.creator_pid, attrs=_capi.attrs_of(info), placement=placement,
        replicas=tuple(_replica(info.replicas[i]) for i in range(info.replica_count)),
        sync_state=_capi.text(info.sync_state), generation=info.generation,
        fill_failure=_capi.text(info.fill_failure), retention=retention, numa_node=numa_node)


def buffer_info_json(json: Dict[str, Any]) -> BufferInfo:
    """From memd_stat_json's document (memctl inspect --json's)."""
    return BufferInfo(
        name=json["name"], id=json["id"], size=json["size_bytes"], location=json["location"],
        owner_uid=json["owner_uid"], owner_gid=json["owner_gid"], mode=int(json["mode"], 8),
        state=json["state"], persistent=json["persistence"] == "persistent",
        lease_count=json["lease_count"], unlinked=json["unlinked"],
        created=seconds(json["created_unix_ns"]),
        sealed=None if json["sealed_unix_ns"] is None else seconds(json["sealed_unix_ns"]),
        creator_pid=json["creator_pid"], attrs=dict(json["attrs"]),
        placement=json.get("placement", ""),
        replicas=tuple(ReplicaInfo(
            location=r["location"], state=r["state"], generation=r["generation"],
            readers=r["readers"], writers=r["writers"], bytes=r["bytes"],
            charged_uid=r["charged_uid"]) for r in json.get("replicas", ())),
        sync_state=json.get("sync_state", ""), generation=json.get("generation", 0),
        fill_failure=json.get("fill_failure", ""), retention=json.get("retention", ""),
        numa_node=json.get("numa_node", -1), holders=_holders(json.get("holders", {})))


def _holders(json: Dict[str, Any]) -> LeaseHolders:
    """BufferInfo.holders from its document (empty from an older libmemd)."""
    listed = tuple(_make(LeaseHolder, dict(h, since=seconds(h["since_unix_ns"])))
                   for h in json.get("listed", ()))
    return LeaseHolders(listed=listed, unlisted_leases=json.get("unlisted_leases", 0),
                        other_users_leases=json.get("other_users_leases", 0))


def call_info(function: Any, *args: Any) -> BufferInfo:
    """Calls a libmemd function that hands out a memd_buffer_info (its
    last arguments memd_buffer_info** and memd_error**), and frees it."""
    info = ctypes.pointer(_capi.BufferInfo())
    _capi.call(function, *args, ctypes.byref(info))
    try:
        return buffer_info(info.contents)
    finally:
        _capi.lib.memd_buffer_info_free(info)


def _pool(json: Dict[str, Any]) -> PoolStats:
    fields = {k: v for k, v in json.items() if k != "size_classes"}
    classes = tuple(_make(SizeClassStats, c) for c in json.get("size_classes", ()))
    return _make(PoolStats, dict(fields, size_classes=classes))


def _durability(json: Dict[str, Any]) -> DurabilityStats:
    fields = dict(json)
    recovered_unix_ns = fields.pop("recovered_unix_ns", 0)
    fields["recovered_at"] = seconds(recovered_unix_ns) if fields.get("recovered") else 0.0
    fields["recovery"] = seconds(fields.pop("recovery_ns", 0))
    return _make(DurabilityStats, fields)


def daemon_stats(json: Dict[str, Any]) -> DaemonStats:
    return DaemonStats(
        version=json["version"], backend=json["backend"],
        pools=tuple(_pool(p) for p in json["pools"]), buffers=json["buffers"],
        sessions=json["sessions"], leases=json["leases"],
        metrics_address=json["metrics_address"], started=seconds(json["started_unix_ns"]),
        devices=tuple(_make(DeviceInfo, d) for d in json["devices"]), waits=json["waits"],
        transfers=_make(TransferStats, json["transfers"]), daemon_wide=json["daemon_wide"],
        durability=_durability(json["durability"]),
        memory_waits=tuple(_make(MemoryWaits, w) for w in json.get("memory_waits", ())))


def sessions(json: List[Dict[str, Any]]) -> List[SessionInfo]:
    out = []
    for s in json:
        fields = dict(s)
        fields["started"] = seconds(fields.pop("started_unix_ns"))
        out.append(_make(SessionInfo, fields))
    return out


def usage(json: List[Dict[str, Any]]) -> List[UidUsage]:
    return [_make(UidUsage, u) for u in json]


def recommendations(json: List[Dict[str, Any]]) -> List[Recommendation]:
    out = []
    for r in json:
        fields = dict(r)
        fields["locations"] = tuple(fields["locations"])
        out.append(_make(Recommendation, fields))
    return out


def leak_report(json: Dict[str, Any]) -> LeakReport:
    leaks = []
    for leak in json["leaks"]:
        fields = dict(leak)
        fields["age"] = fields.pop("age_seconds")
        leaks.append(_make(Leak, fields))
    return LeakReport(leaks=tuple(leaks), omitted=json["omitted"])


def trimmed(json: List[Dict[str, Any]]) -> List[TrimmedPool]:
    return [_make(TrimmedPool, t) for t in json]


def progress(json: Dict[str, Any]) -> TransferProgress:
    code = json["error_code"]
    return TransferProgress(
        id=json["id"], state=json["state"], bytes_done=json["bytes_done"],
        bytes_total=json["bytes_total"], direction=json["direction"], path=json["path"],
        device=json["device"], retries=json["retries"],
        error=error_for_code(code, json["error_message"]) if code else None,
        elapsed=seconds(json["elapsed_ns"]))


def transfer_list(json: Dict[str, Any]) -> TransferList:
    transfers = []
    for transfer in json["transfers"]:
        fields = dict(transfer)
        fields["progress"] = progress(fields["progress"])
        fields["age"] = seconds(fields.pop("age_ns"))
        transfers.append(_make(TransferInfo, fields))
    return TransferList(transfers=tuple(transfers), omitted=json["omitted"])
