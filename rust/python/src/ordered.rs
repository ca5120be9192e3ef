//! `OrderedStream`: an open-ended ordered consumer; `__next__` yields the next batch.

use std::sync::Mutex;

use jetstream_arrow_core::read::OrderedStream as CoreStream;
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3_arrow::PyRecordBatch;

use crate::errors::GlueResult;
use crate::runtime::wait;

#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct OrderedStream {
    inner: Mutex<Option<CoreStream>>,
}

impl OrderedStream {
    pub fn new(inner: CoreStream) -> Self {
        Self {
            inner: Mutex::new(Some(inner)),
        }
    }
}

#[pymethods]
impl OrderedStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> GlueResult<PyRecordBatch> {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(mut stream) = guard.take() else {
            return Err(PyStopIteration::new_err(()).into());
        };
        // The stream moves into the task and comes back with the batch; after an
        // interrupt it is gone (its consumer is deleted) and iteration ends.
        let (stream, next) = wait(py, async move {
            let next = stream.next_batch().await;
            (stream, next)
        })?;
        *guard = Some(stream);
        Ok(PyRecordBatch::new(next?))
    }

    /// How often the consumer was recreated to get past a failure.
    #[getter]
    fn resets(&self) -> u32 {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |s| s.resets())
    }

    fn close(&self, py: Python<'_>) -> GlueResult<()> {
        let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut stream) = taken {
            wait(py, async move { stream.close().await })?;
        }
        Ok(())
    }
}
