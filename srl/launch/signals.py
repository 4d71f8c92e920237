"""SIGTERM as Ctrl-C, for every launcher's controller.

A job a shell starts in the background ignores SIGINT, and schedulers and `kill` send SIGTERM:
either way the run should stop as Ctrl-C stops it, its workers told to finish, the trainer's
last checkpoint and summary.json written. Raising KeyboardInterrupt (not a private exception)
means a signal that lands while workers start still reaches `run_experiment`'s Ctrl-C path
instead of ending the process with a traceback.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable


def interrupt_on_sigterm() -> Callable[[], object]:
    """From now on SIGTERM raises KeyboardInterrupt in the main thread; returns the function that
    puts the previous handler back. Off the main thread (a test driving a launcher from a thread)
    handlers cannot be set, and nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    return lambda: signal.signal(signal.SIGTERM, previous)
