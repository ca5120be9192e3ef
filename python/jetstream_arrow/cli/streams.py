"""Small checks about streams, shared by the commands."""

from __future__ import annotations

from typing import Any

from .._subjects import subject_matches
from .errors import CliError
from .progress import human_duration


def check_subject_in_stream(subject: str, info: Any) -> None:
    subjects = list(info.config.subjects or [])
    if subjects and not any(subject_matches(p, subject) for p in subjects):
        raise CliError(
            f"stream {info.config.name!r} does not store subject {subject!r} (its subjects: "
            f"{', '.join(subjects)}); choose a matching --subject or add the subject to "
            "the stream"
        )


def describe_duplicate_window(info: Any) -> str:
    window = info.config.duplicate_window
    if not window:
        return "within the stream's duplicate window (server default, 2 minutes)"
    seconds = float(window.total_seconds() if hasattr(window, "total_seconds") else window)
    return f"within the stream's duplicate window ({human_duration(seconds)})"
