"""Integer options out of the native core's range, named.

The native core takes counts (``window``, ``batch_rows``, ``max_messages``, ...) as
unsigned integers; a negative or too large Python int fails its conversion with a
bare ``OverflowError`` that names no argument. :func:`names_counts` turns that into
a ``BadInputError`` naming the option, as every other bad option is reported.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from .exceptions import BadInputError

_F = TypeVar("_F", bound=Callable[..., Any])

#: The largest count every native option takes (some are 32-bit, e.g. ``max_retries``).
_ALWAYS_FITS = 2**32 - 1


def names_counts(func: _F) -> _F:
    """``func``, raising ``BadInputError`` naming the integer option the native core
    could not take, instead of a bare ``OverflowError``."""
    signature = inspect.signature(func)
    spread = {
        p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD
    }

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except OverflowError as err:
            given: dict[str, Any] = {}
            for name, value in signature.bind_partial(*args, **kwargs).arguments.items():
                given.update(value if name in spread else {name: value})
            raise _named(err, given) from None

    return wrapper  # type: ignore[return-value]


def _named(err: OverflowError, given: dict[str, Any]) -> BadInputError | OverflowError:
    ints = {
        name: value
        for name, value in given.items()
        if isinstance(value, int) and not isinstance(value, bool)
    }
    negative = [name for name, value in ints.items() if value < 0]
    culprits = negative or [name for name, value in ints.items() if value > _ALWAYS_FITS]
    if not culprits:
        return err
    shown = ", ".join(f"'{name}' ({ints[name]})" for name in culprits)
    return BadInputError(
        f"option {shown} out of range: counts and sequences are non-negative integers ({err})"
    )
