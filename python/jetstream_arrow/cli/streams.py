"""Small checks about streams, shared by the commands."""

from __future__ import annotations

from typing import Any

from .errors import CliError
from .progress import human_duration


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` is one token, ``>`` one or more at the end."""
    p, s = pattern.split("."), subject.split(".")
    for i, token in enumerate(p):
        if token == ">":
            return len(s) > i
        if i >= len(s) or (token != "*" and token != s[i]):
            return False
    return len(p) == len(s)


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
