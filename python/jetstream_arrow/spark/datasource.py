"""``spark.read``, ``spark.readStream``, ``df.write`` and ``df.writeStream`` with
``format("jetstream")``: the data source that Spark instantiates, and nothing else.

Built on Spark's Python Data Source API. It parses the options (:mod:`.options`) and
hands them to the batch reader (:mod:`.batch_reader`), the batch writer
(:mod:`.batch_writer`), the stream reader (:mod:`.stream_reader`; through a durable
consumer, :mod:`.consumer_stream_reader`) or the stream writer (:mod:`.stream_writer`),
which hold the logic.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
)
from pyspark.sql.types import StructType

from .batch_reader import JetStreamPushdownReader, JetStreamReader
from .batch_writer import JetStreamWriter
from .columns import arrow_schema
from .connection_cache import get_client
from .consumer_stream_reader import ConsumerStreamReader
from .dead_letters import check_dead_letter_stream, routes_dead_letters
from .exactly_once import exactly_once_planned
from .options import WriteOptions, parse_read_options, parse_write_options
from .pushdown import planning_with_pushdown
from .reading import checked_schema
from .stream_reader import JetStreamStreamReader
from .stream_writer import JetStreamStreamWriter
from .value_codec import infers_value_schema, read_schema
from .writing import WriteColumns, check_expected_stream, refuse_overwrite, write_columns


class JetStreamDataSource(DataSource):
    """Format ``"jetstream"``: batch and streaming reads of a stream, and Arrow writes
    (batch and streaming) into streams."""

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def __repr__(self) -> str:
        return "JetStreamDataSource()"

    #: Whether schema() inferred the JSON value's schema. Spark asks for it only when
    #: the user gave none (.schema(...)), then pickles this instance, so reader() and
    #: streamReader() see what it set.
    value_inferred = False

    def schema(self) -> StructType:
        # Spark asks for the schema before it says whether the read is a batch or a
        # streaming one; reader() and streamReader() check the options for their kind.
        opts = parse_read_options(self.options, need_stream=False, queries=None)
        self.value_inferred = infers_value_schema(opts)
        return read_schema(opts)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_read_options(self.options)
        expected = checked_schema(opts, schema)
        if routes_dead_letters(opts):
            check_dead_letter_stream(get_client(opts.connect), opts)
        cls = JetStreamPushdownReader if planning_with_pushdown() else JetStreamReader
        return cls(opts, expected, self.value_inferred)

    def writer(self, schema: StructType, overwrite: bool) -> JetStreamWriter:
        refuse_overwrite(overwrite)
        opts = parse_write_options(self.options)
        columns = self._publish_columns(opts, schema)
        check_expected_stream(opts)
        exactly_once = exactly_once_planned(opts, columns, f"write {opts.write_id}")
        return JetStreamWriter(opts, columns, exactly_once)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_read_options(self.options, queries="stream")
        if routes_dead_letters(opts):
            check_dead_letter_stream(get_client(opts.connect), opts)
        if opts.consumer is not None:
            return ConsumerStreamReader(opts, checked_schema(opts, schema), self.value_inferred)
        return JetStreamStreamReader(opts, checked_schema(opts, schema), self.value_inferred)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        refuse_overwrite(overwrite, streaming=True)
        opts = parse_write_options(self.options, queries="stream")
        columns = self._publish_columns(opts, schema)
        check_expected_stream(opts)
        exactly_once = exactly_once_planned(opts, columns, "streaming write")
        return JetStreamStreamWriter(opts, columns, exactly_once)

    @staticmethod
    def _publish_columns(opts: WriteOptions, schema: StructType) -> WriteColumns:
        return write_columns(opts, arrow_schema(schema))
