"""Messages a process's receivers dropped, per stream: counted for the controller and logged,
never silenced.

Two kinds of drop land here, whatever the transport: a message tcp refused before it was read
(not signed by the run, a copy of one already taken: srl.streams.tcp), and a message signed by
the run whose shape its stream does not allow (srl.streams.schema). The worker shell sends the
counts with each report (`rejected_messages` in metrics and summary, per stream in summary.json);
a flood is one log line per stream every `LOG_EVERY_S`, with the count since the last line.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

log = logging.getLogger(__name__)
LOG_EVERY_S = 10.0


class Rejections:
    def __init__(self) -> None:
        self._taken: Counter = Counter()  # stream -> drops since the last `take`
        self.total: Counter = Counter()  # stream -> drops since this process started
        self._logged_s: dict[str, float] = {}  # stream -> when its last line was logged
        self._logged: Counter = Counter()  # stream -> its total at that line

    def reject(self, stream: str, error: Exception) -> None:
        self._taken[stream] += 1
        self.total[stream] += 1
        now = time.monotonic()
        if now - self._logged_s.get(stream, -LOG_EVERY_S) >= LOG_EVERY_S:
            since = self.total[stream] - self._logged[stream]
            log.warning("stream %s: dropped %d message(s) since the last line, %d in all; the last: %s",
                        stream, since, self.total[stream], error)
            self._logged_s[stream], self._logged[stream] = now, self.total[stream]

    def take(self) -> dict[str, int]:
        """Drops per stream since the last call."""
        out = dict(self._taken)
        self._taken.clear()
        return out
