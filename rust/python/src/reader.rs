//! `Client.read` and `Client.follow` hand Python a native reader of Arrow batches
//! (a range, or an open-ended ordered stream), whose steps the facade wraps in
//! `pa.RecordBatchReader.from_batches` or iterates. Each step is a `Call`: waited for
//! with the GIL released, or awaited; an error it raises is the package's own
//! exception class, and pyarrow passes it through unchanged (an Arrow C stream would
//! turn it into text). Closing or dropping the reader deletes the read's consumer on
//! the server; a step interrupted (Ctrl-C, a cancelled asyncio task) ends the read
//! (`runtime.rs::Slot`).

use std::future::Future;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use jetstream_arrow_core::connection::Connection;
use jetstream_arrow_core::read::last::LastPerSubject;
use jetstream_arrow_core::read::{OrderedStream, ReadOptions, StreamReader};
use jetstream_arrow_core::Error;
use pyo3::prelude::*;
use pyo3_arrow::{PyRecordBatch, PySchema};

use crate::aio::Call;
use crate::runtime::{Slot, Steps};

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

    /// The next batch; None at the end (the read's consumer is then deleted).
    /// Interrupted, it ends the read: the next step gives None.
    fn next_batch(&self) -> Call {
        let next = self.inner.next();
        Call::new(async move { Ok::<_, Error>(next.await?.map(PyRecordBatch::new)) })
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
    fn close(&self) -> Call {
        let closing = self.inner.close();
        Call::new(async move {
            closing.await;
            Ok::<_, Error>(())
        })
    }
}

/// The opening of a read, to run on the runtime: errors of the opening (no such
/// stream, bad options, permissions) raise before any batch is read.
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
