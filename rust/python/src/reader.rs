//! `Client.read` hands Python an Arrow C stream (a pyo3-arrow `RecordBatchReader`)
//! that pyarrow turns into a `pa.RecordBatchReader`. pyarrow pulls each batch with
//! the GIL released; closing or dropping the reader drops the core reader, which
//! deletes the read's consumer on the server.

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use jetstream_arrow_core::connection::Connection;
use jetstream_arrow_core::read::{ReadOptions, StreamReader};
use pyo3::prelude::*;
use pyo3_arrow::PyRecordBatchReader;

use crate::errors::GlueResult;
use crate::runtime::{runtime, wait};

/// Drives a core reader batch by batch from the thread pyarrow reads on.
struct BlockingStreamReader {
    inner: Option<StreamReader>,
    schema: SchemaRef,
}

impl Iterator for BlockingStreamReader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut reader = self.inner.take()?;
        let rt = runtime();
        // The read runs on a runtime worker beside the connection's tasks; this
        // thread only waits for the batch.
        let task = rt.spawn(async move {
            let next = reader.next_batch().await;
            (reader, next)
        });
        let (reader, next) = match rt.block_on(task) {
            Ok(done) => done,
            Err(e) => return Some(Err(ArrowError::ExternalError(Box::new(e)))),
        };
        match next {
            Ok(Some(batch)) => {
                self.inner = Some(reader);
                Some(Ok(batch))
            }
            Ok(None) => None,
            Err(e) => Some(Err(ArrowError::ExternalError(Box::new(e)))),
        }
    }
}

impl RecordBatchReader for BlockingStreamReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Open a read; errors of the opening (no such stream, bad options, permissions)
/// raise typed exceptions here, before any batch is read.
pub fn open(
    py: Python<'_>,
    conn: Connection,
    stream: &str,
    options: ReadOptions,
) -> GlueResult<PyRecordBatchReader> {
    let stream = stream.to_string();
    let reader = wait(py, async move {
        StreamReader::open(conn, &stream, options).await
    })??;
    let schema = reader.schema();
    Ok(PyRecordBatchReader::new(Box::new(BlockingStreamReader {
        inner: Some(reader),
        schema,
    })))
}
