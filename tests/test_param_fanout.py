"""benchmarks/param_fanout.py at tiny sizes: the real parameter stream (publisher, service kernel,
subscribers over the signed TcpTransport) reaches every subscriber with the last version, on
loopback and across network namespaces, directly, through the relay topology and through srl's
relay worker (srl.workers.params.ParamRelayKernel); the service's
egress, counted from its sockets' acknowledged bytes, is one message per subscriber per version
directly and one per subscriber host through relays. Counted, not timed.

The namespaces need root (CI runs as root): elsewhere this fails saying so; it never skips."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from param_fanout import main  # noqa: E402

KEYS = {"net", "topology", "subscribers", "size_bytes", "publish_to_last_s_p50", "publish_to_last_s_max",
        "egress_bytes_per_s", "egress_bytes", "copies_per_version", "skipped_versions", "all_have_last",
        "subscribers_heard", "subscriber_hosts", "message_bytes", "warm_s", "warm_copies"}  # fmt: skip


def test_every_subscriber_gets_the_last_version_and_egress_counts_copies():
    if os.geteuid() != 0:
        pytest.fail("tests/test_param_fanout.py makes network namespaces: run it as root (CI does)")
    result = main(["--subscribers", "5", "--sizes", "16k", "--nets", "loopback,1gbit", "--hosts", "2",
                   "--versions", "2", "--rate-hz", "5"])  # fmt: skip
    cells = result["cells"]
    assert [(c["net"], c["topology"]) for c in cells] == [
        (net, topology) for net in ("loopback", "1gbit") for topology in ("direct", "relay", "srl-relay")
    ]
    for cell in cells:
        assert set(cell) >= KEYS, KEYS - set(cell)
        assert cell["subscribers_heard"] == 5 and cell["all_have_last"], cell
        assert cell["publish_to_last_s_max"] is not None  # every version reached every subscriber
        # what left the service: each version once per subscriber (direct) or per relay (2 hosts)
        expected = 5 if cell["topology"] == "direct" else 2
        assert abs(cell["copies_per_version"] - expected) < 0.1, cell
