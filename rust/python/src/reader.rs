//! `Client.read` hands Python a native iterator of Arrow batches, which the facade
//! wraps in `pa.RecordBatchReader.from_batches`. Each batch is read with the GIL
//! released; an error raised by `__next__` is the package's own exception class, and
//! pyarrow passes it through unchanged (an Arrow C stream would turn it into text).
//! Closing or dropping the iterator deletes the read's consumer on the server.

use std::sync::Mutex;

use arrow_schema::SchemaRef;
use jetstream_arrow_core::connection::Connection;
use jetstream_arrow_core::read::{ReadOptions, StreamReader};
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3_arrow::{PyRecordBatch, PySchema};

use crate::errors::GlueResult;
use crate::runtime::{step, wait};

#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct ReadBatches {
    inner: Mutex<Option<StreamReader>>,
    schema: SchemaRef,
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
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |r| r.resets())
    }

    /// Stop reading and delete the read's consumer.
    fn close(&self, py: Python<'_>) -> GlueResult<()> {
        let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut reader) = taken {
            wait(py, async move { reader.finish().await })?;
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
    let reader = wait(py, async move {
        StreamReader::open(conn, &stream, options).await
    })??;
    Ok(ReadBatches {
        schema: reader.schema(),
        inner: Mutex::new(Some(reader)),
    })
}
