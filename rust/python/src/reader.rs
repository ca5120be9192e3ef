//! `Client.read` and `Client.follow` hand Python a native iterator of Arrow batches
//! (a range, or an open-ended ordered stream), which the facade wraps in
//! `pa.RecordBatchReader.from_batches` or iterates. Each batch is read with the GIL
//! released; an error raised by `__next__` is the package's own exception class, and
//! pyarrow passes it through unchanged (an Arrow C stream would turn it into text).
//! Closing or dropping the iterator deletes the read's consumer on the server.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use jetstream_arrow_core::connection::Connection;
use jetstream_arrow_core::read::last::LastPerSubject;
use jetstream_arrow_core::read::{OrderedStream, ReadOptions, StreamReader};
use jetstream_arrow_core::Error;
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3_arrow::{PyRecordBatch, PySchema};

use crate::errors::GlueResult;
use crate::runtime::{step, wait};

/// Where a `ReadBatches`' batches come from.
pub enum Batches {
    /// A range: ends.
    Range(Box<StreamReader>),
    /// An open-ended ordered stream: never ends by itself.
    Follow(Box<OrderedStream>),
    /// The latest message of each subject: ends.
    Latest(Box<LastPerSubject>),
}

impl Batches {
    async fn next_batch(&mut self) -> Result<Option<RecordBatch>, Error> {
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

    fn resets(&self) -> u32 {
        match self {
            Self::Range(reader) => reader.resets(),
            Self::Follow(stream) => stream.resets(),
            Self::Latest(_) => 0,
        }
    }

    fn malformed(&self) -> u64 {
        match self {
            Self::Range(reader) => reader.malformed(),
            Self::Follow(stream) => stream.malformed(),
            Self::Latest(_) => 0,
        }
    }
}

#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct ReadBatches {
    inner: Mutex<Option<Batches>>,
    schema: SchemaRef,
    /// Payloads that did not decode, as of the last batch (kept after the end).
    malformed: AtomicU64,
    /// Consumer recreations, as of the last batch (kept after the end).
    resets: AtomicU32,
}

impl ReadBatches {
    pub fn new(batches: Batches, schema: SchemaRef) -> Self {
        Self {
            inner: Mutex::new(Some(batches)),
            schema,
            malformed: AtomicU64::new(0),
            resets: AtomicU32::new(0),
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
        let next = step(py, &self.inner, |mut reader| async move {
            let next = reader.next_batch().await;
            (reader, next)
        })?;
        if let Some(batches) = self
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            self.malformed.store(batches.malformed(), Ordering::Relaxed);
            self.resets.store(batches.resets(), Ordering::Relaxed);
        }
        match next.flatten() {
            Some(batch) => Ok(PyRecordBatch::new(batch)),
            None => {
                self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
                Err(PyStopIteration::new_err(()).into())
            }
        }
    }

    /// How often the read recreated its consumer to get past a failure.
    #[getter]
    fn resets(&self) -> u32 {
        self.resets.load(Ordering::Relaxed)
    }

    /// Payloads that did not decode so far: dropped (`dropmalformed`) or kept as
    /// `_corrupt_record` (`permissive`).
    #[getter]
    fn malformed(&self) -> u64 {
        self.malformed.load(Ordering::Relaxed)
    }

    /// Stop reading and delete the read's consumer.
    fn close(&self, py: Python<'_>) -> GlueResult<()> {
        let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut batches) = taken {
            wait(py, async move { batches.close().await })?;
        }
        Ok(())
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
    let stream = stream.to_string();
    if let Some(last) = options.last_options()? {
        let reader = wait(py, async move {
            LastPerSubject::open(conn, &stream, last).await
        })??;
        let schema = reader.schema();
        return Ok(ReadBatches::new(Batches::Latest(Box::new(reader)), schema));
    }
    let reader = wait(py, async move {
        StreamReader::open(conn, &stream, options).await
    })??;
    let schema = reader.schema();
    Ok(ReadBatches::new(Batches::Range(Box::new(reader)), schema))
}
