"""Stream listings are paged by the server by offset (256 stream infos a page): streams
deleted between two pages move every later name back, and a listing that asked for
the next page at the old offset skipped live streams. Streams are made and deleted
with nats-py, between the listing's pages."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import nats

import jetstream_arrow as ja
from jetstream_arrow import _core
from jetstream_arrow.spark.options import parse_read_options
from jetstream_arrow.spark.stream_lookup import streams_of

#: More than one page of STREAM.LIST (the server's limit is 256).
STREAMS = 300


def natspy(url: str, work: Callable[[Any], Any]) -> Any:
    async def run() -> Any:
        nc = await nats.connect(url)
        try:
            return await asyncio.wait_for(work(nc.jetstream()), 60)
        finally:
            await nc.close()

    return asyncio.run(run())


def make_streams(url: str, names: list[str]) -> None:
    async def work(js: Any) -> None:
        await asyncio.gather(
            *(js.add_stream(name=n, subjects=[f"{n}.>"], storage="memory") for n in names)
        )

    natspy(url, work)


def delete_streams(url: str, names: list[str]) -> None:
    async def work(js: Any) -> None:
        await asyncio.gather(*(js.delete_stream(n) for n in names))

    natspy(url, work)


def server_names(url: str) -> set[str]:
    """Every stream name, from nats-py's own listing (a page at a time, by offset) of
    a server whose streams no longer change."""

    async def work(js: Any) -> set[str]:
        names: set[str] = set()
        while page := await js.streams_info(offset=len(names)):
            names.update(info.config.name for info in page)
        return names

    return set(natspy(url, work))


def delete_after_first_page(client: ja.Client, url: str, doomed: list[str]) -> list[int]:
    """Have ``client`` delete ``doomed`` (with nats-py) once the first page of a
    stream listing is answered; the offsets it asked for, in order."""
    asked: list[int] = []
    api_json = client._api_json

    def paging(subject: str, body: Any = None, resume_timeout: Any = None) -> Any:
        reply = api_json(subject, body, resume_timeout)
        if subject == _core.API_STREAM_LIST:
            asked.append(int((body or {}).get("offset", 0)))
            if len(asked) == 1:
                delete_streams(url, doomed)
        return reply

    client._api_json = paging  # type: ignore[method-assign]
    return asked


NAMES = [f"L{i:03d}" for i in range(STREAMS)]


def test_a_stream_deleted_between_pages_hides_no_live_stream(nats_server: Any) -> None:
    """One stream before the page boundary deleted: the first name of the next page
    (L256) moved back into the first page's range."""
    url, names = nats_server.url, NAMES
    make_streams(url, names)
    with ja.connect(url) as client:
        asked = delete_after_first_page(client, url, ["L000"])
        listed = [info.config.name for info in client.list_streams()]
        # Every live stream, each once; the deleted one may have been listed before
        # it went.
        alive = names[1:]
        assert set(alive) - set(listed) == set(), asked
        assert sorted(listed) in (alive, names)
        assert server_names(url) == set(alive)


def test_streams_deleted_past_the_next_pages_offset_hide_no_live_stream(
    nats_server: Any,
) -> None:
    """More streams deleted than the next page holds (the listing's total drops below
    the next page's offset), through the Spark source's streamPattern lookup."""
    url, names = nats_server.url, NAMES
    make_streams(url, names)
    with ja.connect(url) as client:
        doomed = names[:60]
        asked = delete_after_first_page(client, url, doomed)
        opts = parse_read_options({"servers": url, "streamPattern": "L[0-9]+"}, queries="stream")
        chosen = streams_of(client, opts)
        alive = names[60:]
        assert set(alive) - set(chosen) == set(), asked
        assert set(chosen) <= set(names)
        assert server_names(url) == set(alive)
