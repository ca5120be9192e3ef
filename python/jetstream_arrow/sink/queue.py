"""A sink's work queue: a stream with ``workqueue`` or ``interest`` retention, whose
messages go once acknowledged, consumed through a durable pull consumer.

A single consumer delivers in stream-sequence order (what it delivers again comes
before anything new), so the target's position tells exactly which deliveries a run
that died between its commit and its acks had already landed.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from .. import _core
from ..codec import ValueCodec, ValueFormat
from ..consumers import ConsumedBatch, PullConsumer
from ..exceptions import BadInputError, NotFoundError
from .patience import Patience

_log = logging.getLogger("jetstream_arrow.sink")

#: The retentions whose streams are consumed through a durable consumer.
QUEUE_RETENTIONS = ("workqueue", "interest")
#: The consumer's own columns, not landed.
DELIVERY_COLUMNS = ("delivered", "consumer_seq")
#: Added to twice ``commit_seconds`` for the ack wait of a consumer the sink creates:
#: the time a commit itself may take.
ACK_WAIT_MARGIN_SECONDS = 60.0
#: Payloads a schema is inferred from when the codec has none.
SAMPLE_ROWS = 1000


def ack_wait_for(commit_seconds: float) -> float:
    """How long a delivery may stay unacknowledged: a message is acknowledged after
    the commit that holds it, at most ``commit_seconds`` after the first pending row
    plus the commit's own time; past that it would be delivered again within the run
    (and skipped, as pending)."""
    return 2 * commit_seconds + ACK_WAIT_MARGIN_SECONDS


def _filters(subjects: str | Sequence[str] | None) -> list[str]:
    if subjects is None:
        return []
    return [subjects] if isinstance(subjects, str) else list(subjects)


class QueueReader:
    """The deliveries of one stream's durable consumer, as batches to land."""

    def __init__(
        self, patience: Patience, consumer: PullConsumer, max_batch: int | None = None
    ) -> None:
        self.patience = patience
        self.client = patience.client
        self.consumer = consumer
        # The consumer sequence of the next delivery: each delivery takes the next
        # one, and a reset to the ack floor (made before this reader) starts again
        # at 1. A gap is deliveries lost on their way (a connection lost mid-pull).
        self.next_consumer_seq = 1
        # The most messages one pull may ask of the consumer (its `max_batch`; the
        # server refuses a pull of more).
        self.max_batch = max_batch if max_batch is not None and max_batch > 0 else None

    def typed(
        self, rows: int, codec: ValueCodec | None, include_headers: bool, set_aside: bool
    ) -> tuple[ValueCodec | None, ConsumedBatch | None]:
        """``codec`` with a value schema: given none, a JSON or Arrow codec gets one
        inferred from the first payloads delivered (a read, which samples the stream,
        is refused on a work queue); unchanged when the consumer delivers nothing now.
        Inferred before the pull that decodes with it, so that a pull failing on a
        field the schema lacks leaves the schema to grow (``ValueSchemas.grow``).

        When no payload of the sample decodes (JSON: none is an object) and
        ``set_aside`` (a dead-letter stream takes them), the sample comes back as
        well, still unacknowledged and not delivered again: the caller sets its
        payloads aside as malformed and acknowledges them with its commit, and the
        next pull infers from what follows."""
        if codec is None or codec.schema is not None or codec.format not in ("json", "arrow"):
            return codec, None
        stream, name = self.consumer.stream, self.consumer.name
        pull = f"pull from consumer {name!r} of stream {stream}"
        if self.max_batch is not None:
            rows = min(rows, self.max_batch)
        sample = self.patience.call(
            stream,
            pull,
            lambda: self.consumer.fetch(
                min(rows, SAMPLE_ROWS), no_wait=True, include_headers=include_headers
            ),
            self._back_to_ack_floor,
        )
        if len(sample) == 0:
            return codec, None
        schema = infer_schema(codec.format, sample.data.column("data").to_pylist())
        if schema is None and set_aside:
            if not self._in_order(sample):
                return codec, None
            return codec, sample
        # The sample (nothing else of this run is unacknowledged yet) is delivered
        # again from the ack floor, in order: decoded with the schema, or to the
        # next run when there is none.
        self._back_to_ack_floor()
        if schema is None or not len(schema):
            # An empty value schema would land every later message with no value
            # columns, and acknowledge (delete) it: nothing is landed instead.
            raise BadInputError(
                f"stream {self.consumer.stream}: no payload of the first {len(sample)} "
                f"messages consumer {self.consumer.name!r} delivered decodes as a "
                f"{codec.format} object, so no value schema can be inferred; nothing "
                "was acknowledged. Give the value schema: in Python "
                "ValueCodec(schema=...), on the command line the schema a `load` "
                "recorded in the stream's metadata; or give the sink a dead-letter "
                "stream (option 'dead_letter_stream', --dead-letter-stream) to set "
                "such payloads aside"
            )
        # JSON grows when a later message holds a field it lacks (the codec's
        # on_new_field 'fail', value_schema.py); an Arrow payload carries its own schema.
        _log.info(
            "stream %s: value schema inferred from the first %d messages consumer %r delivered: %s",
            self.consumer.stream,
            len(sample),
            self.consumer.name,
            ", ".join(f"{f.name} {f.type}" for f in schema),
        )
        return dataclasses.replace(codec, schema=schema), None

    def fetch(
        self, rows: int, codec: ValueCodec | None, include_headers: bool
    ) -> ConsumedBatch | None:
        """Up to ``rows`` messages the consumer has now, decoded with ``codec`` (None
        when it has none, or ``codec`` still lacks the schema it needs: see
        :meth:`typed`)."""
        if codec is not None and codec.schema is None and codec.format in ("json", "arrow"):
            return None
        if self.max_batch is not None:
            rows = min(rows, self.max_batch)
        stream, name = self.consumer.stream, self.consumer.name
        pull = f"pull from consumer {name!r} of stream {stream}"
        delivered = self.patience.call(
            stream,
            pull,
            lambda: self.consumer.fetch(
                rows, no_wait=True, include_headers=include_headers, codec=codec
            ),
            self._back_to_ack_floor,
        )
        if not len(delivered) or not self._in_order(delivered):
            return None
        return delivered

    def _in_order(self, delivered: ConsumedBatch) -> bool:
        """Whether ``delivered`` comes next, in consumer sequence (then counted);
        else the consumer is moved back to its ack floor."""
        consumer_seqs = delivered.data.column("consumer_seq").to_pylist()
        expected = list(range(self.next_consumer_seq, self.next_consumer_seq + len(delivered)))
        if consumer_seqs != expected:
            # What the server delivered in between never arrived: it would come again
            # only after its ack wait, behind what this run lands meanwhile, and be
            # skipped as pending. From the ack floor it comes again in order; this
            # batch too (not landed now).
            _log.warning(
                "consumer %r of stream %s: deliveries %s arrived where %s were due (some "
                "were lost on their way); delivering again from the ack floor",
                self.consumer.name,
                self.consumer.stream,
                f"{consumer_seqs[0]}..{consumer_seqs[-1]}",
                f"{expected[0]}..{expected[-1]}",
            )
            self._back_to_ack_floor()
            return False
        self.next_consumer_seq += len(delivered)
        return True

    def schema_from(self, seq: int, value_format: ValueFormat) -> pa.Schema | None:
        """The value schema inferred from the payloads of stream sequence ``seq`` on
        (at most ``SAMPLE_ROWS``), as the consumer delivers them again from its ack
        floor: a pull whose batch failed to decode (a JSON field its schema lacks) was
        handed out to no one and acknowledged by no one, so its messages are still
        the consumer's. Moved back to the ack floor after, they come again in order
        (what this run holds pending is skipped, as pending)."""
        stream, name = self.consumer.stream, self.consumer.name
        pull = f"pull from consumer {name!r} of stream {stream}"
        rows = SAMPLE_ROWS if self.max_batch is None else min(SAMPLE_ROWS, self.max_batch)
        self._back_to_ack_floor()
        payloads: list[bytes | None] = []
        # Ends: each pull delivers what comes next, and the consumer delivers nothing
        # once it has handed out all it holds, or its max_ack_pending.
        while len(payloads) < SAMPLE_ROWS:
            raw = self.patience.call(
                stream,
                pull,
                lambda: self.consumer.fetch(rows, no_wait=True),
                self._back_to_ack_floor,
            )
            if not len(raw):
                break
            seqs = raw.data.column("seq").to_pylist()
            data = raw.data.column("data").to_pylist()
            payloads.extend(p for s, p in zip(seqs, data, strict=True) if s >= seq)
        self._back_to_ack_floor()
        return infer_schema(value_format, payloads[:SAMPLE_ROWS])

    def _back_to_ack_floor(self) -> None:
        """Move the consumer back to its ack floor. After a pull that failed (its
        reply lost), what the server delivered to it would otherwise come again only
        after the ack wait, behind messages landed meanwhile, and be skipped as
        pending: from the ack floor everything unacknowledged comes again in order,
        what this run holds pending (skipped, acknowledged with its commit) and what
        it never got (landed)."""
        stream, name = self.consumer.stream, self.consumer.name
        self.patience.call(
            stream,
            f"reset of consumer {name!r} of stream {stream}",
            lambda: self.client.reset_consumer(stream, name),
        )
        self.next_consumer_seq = 1

    def pending(self) -> int:
        """Messages the consumer has yet to deliver."""
        stream, name = self.consumer.stream, self.consumer.name
        info = self.patience.call(
            stream,
            f"consumer {name!r} of stream {stream} info",
            lambda: self.client.consumer_info(stream, name),
        )
        return int(info.num_pending)

    @staticmethod
    def rows(delivered: ConsumedBatch) -> pa.RecordBatch:
        """The delivered messages with the columns a read has."""
        data = delivered.data
        return data.drop_columns([c for c in DELIVERY_COLUMNS if c in data.schema.names])


def infer_schema(value_format: ValueFormat, payloads: list[bytes | None]) -> pa.Schema | None:
    """The value schema of ``payloads`` (as the consumer delivered them: decompressed
    as a read's are), inferred by the core code a read infers with, so a work queue
    lands what a range read of the same messages would (an integer beyond int64 a
    decimal, a field of two types as the read takes it); None when no payload holds
    a value (JSON: none is an object; Arrow: none is an IPC stream)."""
    inferred = _core.infer_value_schema(ValueCodec(format=value_format), payloads)
    return None if inferred is None else pa.schema(inferred)


def grown_type(known: pa.DataType, seen: pa.DataType) -> pa.DataType:
    """``known`` (a value type a read used) with what ``seen`` (one inferred from a
    later sample) adds: fields it lacks, at any depth, and a type where it had only
    nulls. A field keeps the type it was landed with."""
    if pa.types.is_null(known):
        return seen
    if pa.types.is_struct(known) and pa.types.is_struct(seen):
        fields = {known.field(i).name: known.field(i) for i in range(known.num_fields)}
        for i in range(seen.num_fields):
            new = seen.field(i)
            old = fields.get(new.name)
            fields[new.name] = new if old is None else old.with_type(grown_type(old.type, new.type))
        return pa.struct(list(fields.values()))
    if pa.types.is_list(known) and pa.types.is_list(seen):
        return pa.list_(known.value_field.with_type(grown_type(known.value_type, seen.value_type)))
    return known


def _refuse_losses(patience: Patience, stream: str, where: str, config: Any) -> None:
    """Refuse a consumer whose settings would let a message go without the sink landing
    it: the position passes what a consumer never delivers, or delivers empty."""
    if config.max_deliver is not None and config.max_deliver > 0:
        # A message whose deliveries run out (a commit slower than the ack wait, a
        # sink killed that many times) is never delivered again: the sink's position
        # passes it by, and a work queue keeps it for no one.
        raise BadInputError(
            f"{where} has max_deliver {config.max_deliver}: a message delivered that many "
            "times without its commit would never be landed; give the sink a consumer "
            "with no max_deliver (unlimited, -1), or a new --durable name to create one"
        )
    if config.deliver_policy not in (None, "all"):
        raise BadInputError(
            f"{where} has deliver_policy {config.deliver_policy!r}: the messages before its "
            "start are never delivered, so never landed; give the sink a consumer with "
            "deliver_policy 'all', or a new --durable name to create one"
        )
    if config.headers_only:
        raise BadInputError(
            f"{where} is headers_only: it delivers no payloads, and the sink would land "
            "them empty; give the sink a consumer without headers_only"
        )
    if config.inactive_threshold:
        retention = patience.stream_info(stream).config.retention
        if retention == "interest":
            # Deleted while no sink pulls, the consumer's interest goes with it, and
            # the stream drops what is stored until the next sink makes it again.
            raise BadInputError(
                f"{where} has inactive_threshold {config.inactive_threshold:g} s: the "
                "server deletes it while no sink runs, and the interest stream then "
                "drops the messages stored meanwhile; give the sink a consumer without "
                "inactive_threshold"
            )


def open_queue(
    patience: Patience,
    stream: str,
    durable: str,
    *,
    subjects: str | Sequence[str] | None,
    commit_rows: int,
    commit_seconds: float,
    batch_rows: int,
) -> QueueReader:
    """Bind to the durable pull consumer ``durable`` of ``stream``, created if
    missing; refused when it exists and cannot serve a sink. Whatever it delivered
    and nobody acknowledged (a sink that died) is delivered again now, not after its
    ack wait."""
    filters = _filters(subjects)
    client = patience.client
    named = f"consumer {durable!r} of stream {stream}"
    try:
        info = patience.call(stream, f"{named} info", lambda: client.consumer_info(stream, durable))
    except NotFoundError:
        # Made again after a lost reply, it exists with this config: that succeeds.
        info = patience.call(
            stream,
            f"creation of {named}",
            lambda: client.create_consumer(
                stream,
                durable_name=durable,
                ack_policy="explicit",
                ack_wait=ack_wait_for(commit_seconds),
                max_ack_pending=commit_rows + 2 * batch_rows,
                filter_subjects=filters or None,
            ),
        )
    config = info.config
    where = f"option 'durable': consumer {durable!r} of stream {stream}"
    if config.deliver_subject is not None:
        raise BadInputError(f"{where} is a push consumer; the sink needs a pull consumer")
    if config.ack_policy != "explicit":
        raise BadInputError(
            f"{where} has ack policy {config.ack_policy!r}; the sink acknowledges each "
            "message after its commit and needs 'explicit'"
        )
    if sorted(config.filter_subjects or []) != sorted(filters):
        raise BadInputError(
            f"{where} filters subjects {config.filter_subjects or []}, the sink was given "
            f"{filters}: name another consumer, or give the same filters"
        )
    _refuse_losses(patience, stream, where, config)
    limit = config.max_ack_pending
    if limit is not None and 0 < limit < commit_rows + batch_rows:
        raise BadInputError(
            f"{where} allows {limit} unacknowledged messages, fewer than a commit's "
            f"rows and a batch ({commit_rows + batch_rows}): lower 'commit_rows' "
            "(--commit-rows) or raise the consumer's max_ack_pending"
        )
    if config.ack_wait is not None and config.ack_wait < commit_seconds:
        # Not a loss: a delivery that comes again while pending is skipped, and
        # acknowledged with the commit; but each one waits for the commit so long.
        _log.warning(
            "%s has an ack wait of %g s, shorter than a commit's %g s (--commit-seconds): "
            "messages are delivered again before their commit acknowledges them",
            where,
            config.ack_wait,
            commit_seconds,
        )
    patience.call(stream, f"reset of {named}", lambda: client.reset_consumer(stream, durable))
    return QueueReader(
        patience, client.pull_consumer(stream, durable, ack_policy="explicit"), config.max_batch
    )
