//! `OrderedStream`: an open-ended ordered consumer; `__next__` yields the next batch.

use std::sync::Mutex;

use jetstream_arrow_core::read::OrderedStream as CoreStream;
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3_arrow::PyRecordBatch;

use crate::errors::GlueResult;
use crate::runtime::{step, wait};

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
        let next = step(py, &self.inner, |mut stream| async move {
            let next = stream.next_batch().await;
            (stream, next)
        })?;
        next.map(PyRecordBatch::new)
            .ok_or_else(|| PyStopIteration::new_err(()).into())
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
