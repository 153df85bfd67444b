"""The offload manifest: which CommitLog segments are in the object store, and their queue ranges.

Stored as JSON, both as the object ``manifest.json`` under the tier prefix (authoritative: a replica
promoted to master reads it) and as ``<store_dir>/tiered/manifest.json`` (a local copy for starting
while the object store is away). Every save bumps ``generation``, writes the object (a PUT is atomic)
and then the local file (temp, fsync, rename); loading takes the higher generation. A segment is
listed only after its three objects were uploaded and verified, so a crash at any point leaves the
old or the new manifest and never a listed segment without its bytes::

    {"version": 1, "generation": 7, "segment_size": 16777216,
     "segments": [{"start": 0, "size": 16777216, "md5": "...", "cq_size": 600, "cq_md5": "...",
                   "index_size": 16404, "index_md5": "...", "min_ts": 1700000000000,
                   "max_ts": 1700000005000, "offloaded_ms": 1700000009000,
                   "queues": [["ns%orders", 0, 0, 30, 0], ...],   # topic, queue id, first queue
                                                                 # offset, count, byte position
                   "topic_bytes": {"ns%orders": 15000000}}]}
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import json
import logging
from pathlib import Path
from typing import Any

from dataplane.store.checkpoint import atomic_write
from dataplane.store.errors import CorruptRecordError
from dataplane.store.mapped_file import segment_name
from dataplane.store.tiered.object_store import ObjectMissingError, ObjectStore

__all__ = (
    "MANIFEST_KEY",
    "ManifestStore",
    "ManifestView",
    "OffloadManifest",
    "TieredSegment",
    "commitlog_key",
    "cq_key",
    "index_key",
)

logger = logging.getLogger(__name__)

MANIFEST_KEY = "manifest.json"


def commitlog_key(start: int) -> str:
    return f"commitlog/{segment_name(start)}"


def cq_key(start: int) -> str:
    return f"consumequeue/{segment_name(start)}"


def index_key(start: int) -> str:
    return f"index/{segment_name(start)}"


@dataclasses.dataclass(slots=True)
class TieredSegment:
    """One offloaded CommitLog segment and what was uploaded with it."""

    start: int
    size: int
    md5: str
    cq_size: int
    cq_md5: str
    index_size: int
    index_md5: str
    min_ts: int
    max_ts: int
    offloaded_ms: int
    # (topic, queue id, first queue offset, entry count, byte position in the ConsumeQueue object)
    queues: list[tuple[str, int, int, int, int]] = dataclasses.field(default_factory=list)
    topic_bytes: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def end(self) -> int:
        return self.start + self.size

    @property
    def stored_bytes(self) -> int:
        return self.size + self.cq_size + self.index_size

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["queues"] = [list(q) for q in self.queues]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TieredSegment:
        data = dict(data)
        data["queues"] = [(str(t), int(q), int(f), int(c), int(p)) for t, q, f, c, p in data["queues"]]
        return cls(**data)


@dataclasses.dataclass(slots=True)
class OffloadManifest:
    """Offloaded segments, oldest first; contiguous unless local segments were lost before offload."""

    generation: int = 0
    segment_size: int = 0
    segments: list[TieredSegment] = dataclasses.field(default_factory=list)

    @property
    def end_offset(self) -> int:
        """CommitLog offset just past the last offloaded byte (0 when nothing is offloaded)."""
        return self.segments[-1].end if self.segments else 0

    def encode(self) -> bytes:
        return json.dumps(
            {
                "version": 1,
                "generation": self.generation,
                "segment_size": self.segment_size,
                "segments": [s.to_json() for s in self.segments],
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, raw: bytes, origin: str) -> OffloadManifest:
        try:
            data = json.loads(raw)
            segments = [TieredSegment.from_json(s) for s in data["segments"]]
            manifest = cls(int(data["generation"]), int(data["segment_size"]), segments)
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptRecordError(f"{origin}: expected an offload manifest: {exc}") from exc
        for prev, seg in itertools.pairwise(segments):
            if seg.start < prev.end:
                raise CorruptRecordError(
                    f"{origin}: expected a segment at or after {prev.end}, found one at {seg.start}"
                )
        return manifest


class ManifestStore:
    """Loads and saves the manifest in the object store and in the local copy."""

    def __init__(self, objects: ObjectStore, local_path: Path) -> None:
        self.objects = objects
        self.local_path = local_path

    def load(self) -> OffloadManifest:
        """The newest of the remote and local manifests; remote errors other than absence propagate
        only when there is no local copy to fall back on."""
        local: OffloadManifest | None = None
        try:
            local = OffloadManifest.decode(self.local_path.read_bytes(), str(self.local_path))
        except FileNotFoundError:
            pass
        remote: OffloadManifest | None = None
        try:
            remote = OffloadManifest.decode(self.objects.get(MANIFEST_KEY), MANIFEST_KEY)
        except ObjectMissingError:
            pass
        except Exception:
            if local is None:
                raise
            logger.warning("tier: remote manifest unreadable, starting from the local copy", exc_info=True)
        candidates = [m for m in (local, remote) if m is not None]
        return max(candidates, key=lambda m: m.generation) if candidates else OffloadManifest()

    def save(self, manifest: OffloadManifest) -> OffloadManifest:
        """Write a new generation of ``manifest``: the object first, then the local copy."""
        new = dataclasses.replace(
            manifest, generation=manifest.generation + 1, segments=list(manifest.segments)
        )
        raw = new.encode()
        self.objects.put(MANIFEST_KEY, raw)
        self.local_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.local_path, raw)
        return new


class ManifestView:
    """An immutable lookup structure over one manifest generation (readers never lock).

    ``queue_spans[(topic, qid)]`` lists the queue's spans in segment order; their queue offsets are
    contiguous because every sealed segment is offloaded, in order.
    """

    def __init__(self, manifest: OffloadManifest) -> None:
        self.manifest = manifest
        self.segments = manifest.segments
        self.starts = [s.start for s in self.segments]
        self.max_ts = [s.max_ts for s in self.segments]
        spans: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}
        for number, seg in enumerate(self.segments):
            for topic, qid, first, count, pos in seg.queues:
                spans.setdefault((topic, qid), []).append((first, count, pos, number))
        self.queue_spans = spans
        self.queue_firsts = {key: [s[0] for s in value] for key, value in spans.items()}
        self.queue_segments = {key: [s[3] for s in value] for key, value in spans.items()}

    @property
    def min_offset(self) -> int:
        return self.segments[0].start if self.segments else 0

    @property
    def end_offset(self) -> int:
        return self.segments[-1].end if self.segments else 0

    def segment_for(self, physical_offset: int) -> TieredSegment | None:
        i = bisect.bisect_right(self.starts, physical_offset) - 1
        if i < 0:
            return None
        seg = self.segments[i]
        return seg if physical_offset < seg.end else None

    def span_for(self, topic: str, queue_id: int, offset: int) -> tuple[int, int, int, int] | None:
        """The span of the queue holding queue offset ``offset``, or None."""
        firsts = self.queue_firsts.get((topic, queue_id))
        if not firsts:
            return None
        i = bisect.bisect_right(firsts, offset) - 1
        if i < 0:
            return None
        span = self.queue_spans[(topic, queue_id)][i]
        return span if offset < span[0] + span[1] else None

    def queue_range(self, topic: str, queue_id: int, cutoff_ms: int) -> tuple[int, int] | None:
        """[first, end) queue offsets of the queue in the tier, skipping segments whose newest message
        is older than ``cutoff_ms`` (logically expired for this topic); None when nothing is left."""
        spans = self.queue_spans.get((topic, queue_id))
        if not spans:
            return None
        first_live = bisect.bisect_left(self.max_ts, cutoff_ms)
        i = bisect.bisect_left(self.queue_segments[(topic, queue_id)], first_live) if first_live else 0
        if i >= len(spans):
            return None
        last = spans[-1]
        return spans[i][0], last[0] + last[1]
