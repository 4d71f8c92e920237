"""Messages a process's receivers dropped, per stream: counted for the controller and logged,
never silenced.

Two kinds of drop land here, whatever the transport: a message tcp refused before it was read
(not signed by the run, a copy of one already taken: srl.streams.tcp), and a message signed by
the run whose shape its stream does not allow (srl.streams.schema). The worker shell sends the
counts with each report (`rejected_messages` in metrics and summary, per stream in summary.json);
a flood is one log line per stream every `LOG_EVERY_S`, with the count since the last line.
Messages dropped at a queue's bound are counted the same way (`Tally`, srl.streams.queues.Drops).
"""

from __future__ import annotations

import logging
import time
from collections import Counter

log = logging.getLogger(__name__)
LOG_EVERY_S = 10.0


class Tally:
    """Messages a process dropped, per stream: since the last `take`, and in all (`total`)."""

    def __init__(self) -> None:
        self._taken: Counter = Counter()  # stream -> drops since the last `take`
        self.total: Counter = Counter()  # stream -> drops since this process started
        self._logged: dict[str, tuple[float, int]] = {}  # stream -> when its last line was logged, its total then

    def _count(self, stream: str, count: int) -> int | None:
        """Count `count` drops of `stream`; when its next log line is due (one per LOG_EVERY_S per
        stream), the drops since its last line, else None."""
        self._taken[stream] += count
        self.total[stream] += count
        now = time.monotonic()
        logged_s, logged = self._logged.get(stream, (-LOG_EVERY_S, 0))
        if now - logged_s < LOG_EVERY_S:
            return None
        self._logged[stream] = (now, self.total[stream])
        return self.total[stream] - logged

    def take(self) -> dict[str, int]:
        """Drops per stream since the last call."""
        out = dict(self._taken)
        self._taken.clear()
        return out


class Rejections(Tally):
    def reject(self, stream: str, error: Exception) -> None:
        since = self._count(stream, 1)
        if since is not None:
            log.warning("stream %s: dropped %d message(s) since the last line, %d in all; the last: %s",
                        stream, since, self.total[stream], error)
