"""What a sync engine is told: the server, batch and pull sizes, rates and intervals."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.sync.connectivity import ConnectivityConfig
from app.sync.transport import TransportConfig

__all__ = ["SyncConfig"]


@dataclass(frozen=True)
class SyncConfig:
    server_url: str
    batch_size: int = 100
    #: While a flush's batches come back full, each next one doubles, up to this (the
    #: server's own limit): 20,000 offline edits go in about 45 requests, not 200, and a few
    #: edits still in one small batch. `batch_size` 1 (one mutation per request) never grows.
    batch_max_size: int = 500
    #: Batches in flight at once (2 overlaps the device's bookkeeping with the server's work).
    delivery_pipeline: int = 2
    #: The worker's own limit on requests per second (on top of honouring 429s), inside the
    #: server's per-device one (30/s, bursts of 300) so that a healthy device never meets
    #: its 429. The burst covers a day offline: 20,000 edits go in 43 batches, and with a
    #: burst of 10 the drain waited 1.65 s on this limit alone, with the server idle.
    request_rate: float = 20.0
    request_burst: float = 50.0
    #: Spread of the first request after connectivity comes back, so that many devices
    #: reconnecting at once do not arrive together. 0 disables it.
    reconnect_jitter_s: float = 3.0
    pull_page_size: int = 500
    pull_interval_s: float = 300.0
    #: A record read (opened in the UI) older than this is refreshed in the background.
    stale_after_s: float = 300.0
    sweep_interval_s: float = 30.0
    lock_retry_s: float = 30.0
    sync_on_metered: bool = True
    clock_skew_warn_s: float = 300.0
    #: An upload's first chunk, and the most a chunk grows to on a fast link while no edit
    #: waits (`app.sync.chunks`): edits go on their own connection, so a chunk only needs to
    #: be long enough to amortise the durable answer the server gives each one. The last
    #: chunk carries no checksum (the file's sha256 covers it), so the larger it is the less
    #: either side hashes: at 128 MiB a 100 MiB file on a fast link goes as 1 and 99 MiB,
    #: and only the first MiB is hashed for its chunk (at 64 MiB: 1, 3, 9, 27 and 60 MiB).
    upload_chunk_bytes: int = 1 << 20
    upload_chunk_max_bytes: int = 128 << 20
    #: The most while edits flow (one is queued or was sent in the last ``upload_quiet_s``).
    upload_chunk_busy_bytes: int = 8 << 20
    upload_quiet_s: float = 5.0
    #: Link time a chunk aims at: on a slow link, what a cut costs (a chunk is re-sent whole).
    upload_chunk_target_s: float = 8.0
    transport: TransportConfig = field(default_factory=TransportConfig)
    connectivity: ConnectivityConfig = field(default_factory=ConnectivityConfig)

    @property
    def largest_batch(self) -> int:
        """The most mutations a flush's batch grows to (`batch_max_size`, unless one by one)."""
        size = self.batch_size
        return max(self.batch_max_size, size) if size > 1 else size
