//! `Client.read` and `Client.follow` hand Python a native iterator of Arrow batches
//! (a range, or an open-ended ordered stream), which the facade wraps in
//! `pa.RecordBatchReader.from_batches` or iterates. Each batch is read with the GIL
//! released; an error raised by `__next__` is the package's own exception class, and
//! pyarrow passes it through unchanged (an Arrow C stream would turn it into text).
//! Closing or dropping the iterator deletes the read's consumer on the server.
//! `next_async` / `close_async` are the same steps as asyncio awaitables; a step whose
//! asyncio task is cancelled ends the read (`runtime.rs::Slot`).

use std::future::Future;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use jetstream_arrow_core::connection::Connection;
use jetstream_arrow_core::read::last::LastPerSubject;
use jetstream_arrow_core::read::{OrderedStream, ReadOptions, StreamReader};
use jetstream_arrow_core::Error;
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3_arrow::{PyRecordBatch, PySchema};

use crate::aio::awaitable;
use crate::errors::GlueResult;
use crate::runtime::{step, wait, Slot, Steps};

/// Where a `ReadBatches`' batches come from.
pub enum Batches {
    /// A range: ends.
    Range(Box<StreamReader>),
    /// An open-ended ordered stream: never ends by itself.
    Follow(Box<OrderedStream>),
    /// The latest message of each subject: ends.
    Latest(Box<LastPerSubject>),
}

impl Steps for Batches {
    type Item = RecordBatch;

    async fn next_item(&mut self) -> Result<Option<RecordBatch>, Error> {
        match self {
            Self::Range(reader) => reader.next_batch().await,
            Self::Follow(stream) => stream.next_batch().await.map(Some),
            Self::Latest(reader) => reader.next_batch().await,
        }
    }

    async fn close(&mut self) {
        match self {
            Self::Range(reader) => reader.finish().await,
            Self::Follow(stream) => stream.close().await,
            Self::Latest(reader) => reader.close().await,
        }
    }

    /// Payloads that did not decode, and resets.
    fn figures(&self) -> [u64; 2] {
        match self {
            Self::Range(reader) => [reader.malformed(), reader.resets().into()],
            Self::Follow(stream) => [stream.malformed(), stream.resets().into()],
            Self::Latest(_) => [0, 0],
        }
    }
}

#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct ReadBatches {
    inner: Slot<Batches>,
    schema: SchemaRef,
}

impl ReadBatches {
    pub fn new(batches: Batches, schema: SchemaRef) -> Self {
        Self {
            inner: Slot::new(batches),
            schema,
        }
    }
}

#[pymethods]
impl ReadBatches {
    /// The schema of every batch.
    fn schema(&self) -> PySchema {
        PySchema::new(self.schema.clone())
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> GlueResult<PyRecordBatch> {
        match step(py, self.inner.next())? {
            Some(batch) => Ok(PyRecordBatch::new(batch)),
            None => Err(PyStopIteration::new_err(()).into()),
        }
    }

    /// The next batch as an asyncio awaitable; None at the end (the read's consumer
    /// is then deleted). Cancelled, it ends the read: the next call returns None.
    fn next_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let next = self.inner.next();
        awaitable(py, async move { Ok(next.await?.map(PyRecordBatch::new)) })
    }

    /// How often the read recreated its consumer to get past a failure.
    #[getter]
    fn resets(&self) -> u64 {
        self.inner.figure(1)
    }

    /// Payloads that did not decode so far: dropped (`dropmalformed`) or kept as
    /// `_corrupt_record` (`permissive`).
    #[getter]
    fn malformed(&self) -> u64 {
        self.inner.figure(0)
    }

    /// Stop reading and delete the read's consumer.
    fn close(&self, py: Python<'_>) -> GlueResult<()> {
        Ok(wait(py, self.inner.close())?)
    }

    /// `close` as an asyncio awaitable.
    fn close_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let closing = self.inner.close();
        awaitable(py, async move {
            closing.await;
            Ok(())
        })
    }
}

/// Open a read; errors of the opening (no such stream, bad options, permissions)
/// raise typed exceptions here, before any batch is read.
pub fn open(
    py: Python<'_>,
    conn: Connection,
    stream: &str,
    options: ReadOptions,
) -> GlueResult<ReadBatches> {
    Ok(wait(py, opening(conn, stream, options))??)
}

/// The opening of a read, to run on the runtime.
pub fn opening(
    conn: Connection,
    stream: &str,
    options: ReadOptions,
) -> impl Future<Output = Result<ReadBatches, Error>> + Send + 'static {
    let stream = stream.to_string();
    async move {
        if let Some(last) = options.last_options()? {
            let reader = LastPerSubject::open(conn, &stream, last).await?;
            let schema = reader.schema();
            return Ok(ReadBatches::new(Batches::Latest(Box::new(reader)), schema));
        }
        let reader = StreamReader::open(conn, &stream, options).await?;
        let schema = reader.schema();
        Ok(ReadBatches::new(Batches::Range(Box::new(reader)), schema))
    }
}
