"""Watching a run: the episode window, the metrics recorder, the live terminal table."""

from srl.monitor.display import LiveDisplay, format_duration, print_summary
from srl.monitor.episodes import ReturnWindow
from srl.monitor.recorder import METRICS_FILE, Recorder

__all__ = ["METRICS_FILE", "LiveDisplay", "Recorder", "ReturnWindow", "format_duration", "print_summary"]
