//! `Reader`: a read of a stream range, one Arrow batch per `__next__`.

use std::sync::Mutex;

use jetstream_arrow_core::connection::Connection;
use jetstream_arrow_core::read::{ReadOptions, StreamReader};
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3_arrow::{PyRecordBatch, PySchema};

use crate::errors::IntoPyResult;
use crate::runtime::wait;

#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct Reader {
    inner: Mutex<Option<StreamReader>>,
    schema: arrow_schema::SchemaRef,
}

impl Reader {
    pub fn open(
        py: Python<'_>,
        conn: Connection,
        stream: &str,
        options: ReadOptions,
    ) -> PyResult<Self> {
        let reader = wait(py, StreamReader::open(conn, stream, options))?.py()?;
        Ok(Self {
            schema: reader.schema(),
            inner: Mutex::new(Some(reader)),
        })
    }
}

#[pymethods]
impl Reader {
    fn schema(&self) -> PySchema {
        PySchema::new(self.schema.clone())
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<PyRecordBatch> {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(reader) = guard.as_mut() else {
            return Err(PyStopIteration::new_err(()));
        };
        match wait(py, reader.next_batch())? {
            Ok(Some(batch)) => Ok(PyRecordBatch::new(batch)),
            Ok(None) => {
                guard.take();
                Err(PyStopIteration::new_err(()))
            }
            Err(e) => {
                // A failed read is over: release its consumer.
                if let Some(mut r) = guard.take() {
                    let _ = wait(py, async move { r.finish().await });
                }
                Err(crate::errors::to_py_err(e, None))
            }
        }
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut reader) = taken {
            wait(py, async move { reader.finish().await })?;
        }
        Ok(())
    }
}
