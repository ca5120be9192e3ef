"""Listings of the JetStream API (STREAM.NAMES, STREAM.LIST, CONSUMER.NAMES,
CONSUMER.LIST) taken whole, page by page.

The server pages a listing sorted by name, by offset (1,024 names or 256 infos a
page). A name deleted between two requests, anywhere before the next page's offset,
moves every later name back by one, so a next page asked at the old offset would
begin past a live name. So each page after the first is asked from the last page's
last name on (one name of overlap), and one that begins past that name (names before
it were deleted meanwhile) is asked again a page earlier, until it begins at or
before it; names already received (the overlap, or names moved forward by ones
created meanwhile) are dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..exceptions import ApiError

#: How many times a listing asks a page again because names before it were deleted
#: meanwhile, before it fails: a bound on a listing of names deleted as fast as it
#: pages, which would otherwise never end.
LISTING_STEPS_BACK = 100


def stream_name(info: dict[str, Any]) -> str:
    """The name of a stream in a STREAM.LIST page."""
    return str((info.get("config") or {}).get("name", ""))


def consumer_name(info: dict[str, Any]) -> str:
    """The name of a consumer in a CONSUMER.LIST page."""
    return str(info.get("name", ""))


def every_page(
    subject: str,
    page_at: Callable[[int], dict[str, Any]],
    key: str,
    name_of: Callable[[Any], str] = str,
    missing: list[str] | None = None,
) -> list[Any]:
    """The items of listing ``subject``, each once, from ``page_at(offset)`` (the
    reply to a request of the page at ``offset``; its items under ``key``, named by
    ``name_of``). The names a clustered server could not answer for in time (its
    replies' ``missing``) are added to ``missing`` when given."""
    items: list[Any] = []
    last: str | None = None  # the greatest name received
    offset = steps_back = 0
    while True:
        reply = page_at(offset)
        page = reply.get(key) or []
        page_missing = [str(name) for name in reply.get("missing") or ()]
        names = [name_of(item) for item in page] + page_missing
        # A page is the slice [offset, offset + limit) of the sorted listing, its
        # missing names included: the next starts after all of them, not after the
        # items received.
        limit = int(reply.get("limit") or 0)
        size = limit if limit > 0 else len(names)
        if last is not None and offset > 0 and (not names or min(names) > last):
            steps_back += 1
            if steps_back > LISTING_STEPS_BACK:
                raise ApiError(
                    f"listing {subject}: names were deleted faster than the listing could "
                    f"page through them ({LISTING_STEPS_BACK} pages asked again)"
                )
            offset = max(0, offset - max(size, 1))
            continue
        items.extend(item for item in page if last is None or name_of(item) > last)
        if missing is not None:
            missing.extend(name for name in page_missing if last is None or name > last)
        if names:
            last = max(names) if last is None else max(last, *names)
        end = offset + size
        if not names or end >= int(reply.get("total", 0)):
            return items
        # Overlap by one name, unless a page of one would not move on.
        offset = end - 1 if size > 1 else end
