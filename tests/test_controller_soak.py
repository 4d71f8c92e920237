"""benchmarks/controller_soak.py at 1,024 synthetic workers: the real supervisor and monitor hold
them with no false heartbeat timeout, absorb 256 exits at once, and after the restarts send each
worker a bounded number of bytes a second (before issue 34, the whole epochs vector, 8 N bytes, to
each of N workers each second). Counted, not timed."""

from __future__ import annotations

import sys
from pathlib import Path

from srl.launch.supervise import EPOCHS_RESEND_PAIRS, EPOCHS_RESEND_S

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from controller_soak import soak  # noqa: E402

WIRE_OVERHEAD_BYTES = 256  # a signed message's MAC, seal, header and framing, generously


def test_a_controller_holds_1024_workers_and_sends_o_1_bytes_a_worker_after_restarts(tmp_path):
    run = soak(1024, processes=4, warmup_s=3.0, steady_s=3.0, after_s=3.0, run_dir=str(tmp_path))
    assert run["workers"] == 1024 and run["exits"] == 256
    assert run["false_timeouts"] == 0
    assert run["epochs_mismatched"] == 0  # every worker's copy is the controller's
    assert run["control_bytes_per_s_before_restart"] == 0  # no restart, no epochs sent
    per_worker = run["control_bytes_per_worker_per_s_after_restart"]
    resend = (16 * EPOCHS_RESEND_PAIRS + WIRE_OVERHEAD_BYTES) / EPOCHS_RESEND_S  # what one peer gets a second
    assert 0 < per_worker <= 2 * resend  # a window may hold one resend more than its seconds
    assert per_worker < 8 * 1024 / 4  # a quarter of the whole vector a second
