"""Numbers written for people, wherever ablate prints them: a duration (a report's wall-time column, a sweep's time
left)."""

from __future__ import annotations


def format_duration(seconds: float | None) -> str:
    """42.0 -> ``42s``; 125 -> ``2m 05s``; 3720 -> ``1h 02m``."""
    if seconds is None:
        return "—"
    s = round(seconds)
    if s < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{s}s"
    return f"{s // 60}m {s % 60:02d}s" if s < 3600 else f"{s // 3600}h {s % 3600 // 60:02d}m"
