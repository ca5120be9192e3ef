//! `PushConsumer` and `PushStream`: durable push consumers, flow-control acking
//! included; batches are the same `ConsumedBatch` as pull consumers yield.

use std::sync::{Arc, Mutex};

use jetstream_arrow_core::connection::Connection;
use jetstream_arrow_core::consumer::AckPolicy;
use jetstream_arrow_core::defaults;
use jetstream_arrow_core::push::{
    PushConsumer as CoreConsumer, PushOptions, PushStream as CoreStream,
};
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;

use crate::consumer::ConsumedBatch;
use crate::errors::GlueResult;
use crate::options::{opt_seconds, seconds};
use crate::runtime::{step, wait};

#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct PushConsumer {
    inner: CoreConsumer,
}

impl PushConsumer {
    pub fn bind(
        py: Python<'_>,
        conn: Connection,
        stream: &str,
        name: &str,
        deliver_subject: Option<String>,
        ack_policy: Option<&str>,
    ) -> GlueResult<Self> {
        let policy = ack_policy.map(AckPolicy::parse).transpose()?;
        let (stream, name) = (stream.to_string(), name.to_string());
        let inner = wait(py, async move {
            CoreConsumer::bind(conn, &stream, &name, deliver_subject, policy).await
        })??;
        Ok(Self { inner })
    }
}

#[pymethods]
impl PushConsumer {
    #[getter]
    fn stream(&self) -> String {
        self.inner.stream.clone()
    }

    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }

    #[getter]
    fn deliver_subject(&self) -> String {
        self.inner.deliver_subject.clone()
    }

    #[pyo3(signature = (
        *, batch_rows=defaults::CONSUME_BATCH_ROWS,
        batch_wait=defaults::CONSUME_BATCH_WAIT.as_secs_f64(), include_headers=false,
        heartbeat=None
    ))]
    fn messages(
        &self,
        py: Python<'_>,
        batch_rows: usize,
        batch_wait: f64,
        include_headers: bool,
        heartbeat: Option<f64>,
    ) -> GlueResult<PushStream> {
        let options = PushOptions {
            batch_rows,
            batch_wait: seconds(batch_wait, "batch_wait")?,
            include_headers,
            heartbeat: opt_seconds(heartbeat, "heartbeat")?,
        };
        let consumer = self.inner.clone();
        let stream = wait(py, async move { consumer.messages(options).await })??;
        Ok(PushStream {
            inner: Mutex::new(Some(stream)),
        })
    }
}

/// Continuous push consumption; `__next__` yields the next `ConsumedBatch`.
#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct PushStream {
    inner: Mutex<Option<CoreStream>>,
}

#[pymethods]
impl PushStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> GlueResult<ConsumedBatch> {
        let next = step(py, &self.inner, |mut stream| async move {
            let next = stream.next_batch().await;
            (stream, next)
        })?;
        next.map(|batch| ConsumedBatch::new(Arc::new(batch)))
            .ok_or_else(|| PyStopIteration::new_err(()).into())
    }

    /// Flow-control answers sent so far (with flow-control acking, the ack messages).
    #[getter]
    fn flow_control_answers(&self) -> u64 {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |s| s.flow_control_answers())
    }

    fn close(&self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}
