//! `PullConsumer`, `ConsumedBatch` and `MessageStream`: durable pull consumers.

use std::sync::{Arc, Mutex};

use jetstream_arrow_core::connection::Connection;
use jetstream_arrow_core::consume::durable::{
    AckKind, AckPolicy, ConsumedBatch as CoreBatch, DurableConsumer, MessageStream as CoreStream,
};
use jetstream_arrow_core::consume::pull::FetchRequest;
use jetstream_arrow_core::consume::push::PushStream;
use jetstream_arrow_core::defaults;
use jetstream_arrow_core::Error;
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3_arrow::PyRecordBatch;

use crate::codec::consumer_codec_spec;
use crate::errors::GlueResult;
use crate::options::consume_options;
use crate::runtime::{step, wait};
use jetstream_arrow_core::option_values::{count, opt_count, opt_seconds, seconds};

#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct PullConsumer {
    inner: DurableConsumer,
}

impl PullConsumer {
    pub fn bind(
        conn: Connection,
        stream: &str,
        name: &str,
        ack_policy: Option<&str>,
    ) -> GlueResult<Self> {
        let policy = ack_policy.map(AckPolicy::parse).transpose()?;
        Ok(Self {
            inner: DurableConsumer::bind(conn, stream, name, policy)?,
        })
    }
}

#[pymethods]
impl PullConsumer {
    #[getter]
    fn stream(&self) -> String {
        self.inner.stream.clone()
    }

    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }

    #[pyo3(signature = (
        max_messages=defaults::FETCH_MAX_MESSAGES as i128, *, max_bytes=None,
        expires=defaults::FETCH_EXPIRES.as_secs_f64(), no_wait=false, heartbeat=None,
        include_headers=false, codec=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn fetch(
        &self,
        py: Python<'_>,
        max_messages: i128,
        max_bytes: Option<i128>,
        expires: f64,
        no_wait: bool,
        heartbeat: Option<f64>,
        include_headers: bool,
        codec: Option<&Bound<'_, PyAny>>,
    ) -> GlueResult<ConsumedBatch> {
        let values = consumer_codec_spec(py, self.inner.connection(), &self.inner.stream, codec)?;
        let expires = seconds(expires, "expires")?;
        let heartbeat = opt_seconds(heartbeat, "heartbeat")?;
        let request = FetchRequest {
            max_messages: count(max_messages, "max_messages")?,
            max_bytes: opt_count(max_bytes, "max_bytes")?,
            expires,
            no_wait,
            heartbeat,
        };
        let consumer = self.inner.clone();
        let batch = wait(py, async move {
            consumer
                .fetch(&request, include_headers, values.as_ref())
                .await
        })??;
        Ok(ConsumedBatch {
            inner: Arc::new(batch),
        })
    }

    /// Continuous consumption as `options` (a `jetstream_arrow.ConsumeOptions`) say.
    #[pyo3(signature = (options, codec=None))]
    fn messages(
        &self,
        py: Python<'_>,
        options: &Bound<'_, PyAny>,
        codec: Option<&Bound<'_, PyAny>>,
    ) -> GlueResult<MessageStream> {
        let mut options = consume_options(options)?;
        options.values =
            consumer_codec_spec(py, self.inner.connection(), &self.inner.stream, codec)?;
        let consumer = self.inner.clone();
        let stream = wait(py, async move { consumer.messages(options).await })??;
        Ok(MessageStream::new(Deliveries::Pull(Box::new(stream))))
    }
}

/// Delivered messages as one Arrow batch, with their acks.
#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct ConsumedBatch {
    inner: Arc<CoreBatch>,
}

impl ConsumedBatch {
    pub fn new(inner: Arc<CoreBatch>) -> Self {
        Self { inner }
    }

    fn send(&self, py: Python<'_>, rows: Option<Vec<usize>>, kind: AckKind) -> GlueResult<()> {
        let batch = self.inner.clone();
        Ok(wait(py, async move {
            batch.acknowledge(rows.as_deref(), kind).await
        })??)
    }
}

#[pymethods]
impl ConsumedBatch {
    fn batch(&self) -> PyRecordBatch {
        PyRecordBatch::new(self.inner.batch.clone())
    }

    /// Payloads of this batch that did not decode: dropped (`dropmalformed`, and
    /// terminated) or kept as `_corrupt_record` (`permissive`).
    #[getter]
    fn malformed(&self) -> u64 {
        self.inner.malformed
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    #[pyo3(signature = (rows=None))]
    fn ack(&self, py: Python<'_>, rows: Option<Vec<usize>>) -> GlueResult<()> {
        self.send(py, rows, AckKind::Ack)
    }

    #[pyo3(signature = (rows=None, timeout=defaults::ACK_SYNC_TIMEOUT.as_secs_f64()))]
    fn ack_sync(&self, py: Python<'_>, rows: Option<Vec<usize>>, timeout: f64) -> GlueResult<()> {
        let timeout = seconds(timeout, "timeout")?;
        let batch = self.inner.clone();
        Ok(wait(py, async move {
            batch.ack_sync(rows.as_deref(), timeout).await
        })??)
    }

    #[pyo3(signature = (rows=None, delay=None))]
    fn nak(&self, py: Python<'_>, rows: Option<Vec<usize>>, delay: Option<f64>) -> GlueResult<()> {
        let delay = opt_seconds(delay, "delay")?;
        self.send(py, rows, AckKind::Nak { delay })
    }

    #[pyo3(signature = (rows=None, reason=None))]
    fn term(
        &self,
        py: Python<'_>,
        rows: Option<Vec<usize>>,
        reason: Option<String>,
    ) -> GlueResult<()> {
        self.send(py, rows, AckKind::Term { reason })
    }

    #[pyo3(signature = (rows=None))]
    fn in_progress(&self, py: Python<'_>, rows: Option<Vec<usize>>) -> GlueResult<()> {
        self.send(py, rows, AckKind::InProgress)
    }
}

/// Where a `MessageStream`'s batches come from.
pub enum Deliveries {
    Pull(Box<CoreStream>),
    Push(Box<PushStream>),
}

impl Deliveries {
    async fn next_batch(&mut self) -> Result<CoreBatch, Error> {
        match self {
            Self::Pull(stream) => stream.next_batch().await,
            Self::Push(stream) => stream.next_batch().await,
        }
    }
}

/// Continuous consumption, pull or push; `__next__` yields the next `ConsumedBatch`.
#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct MessageStream {
    inner: Mutex<Option<Deliveries>>,
}

impl MessageStream {
    pub fn new(deliveries: Deliveries) -> Self {
        Self {
            inner: Mutex::new(Some(deliveries)),
        }
    }

    /// A figure of a push stream; 0 for pull streams and closed ones.
    fn push_figure(&self, figure: fn(&PushStream) -> u64) -> u64 {
        match self
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            Some(Deliveries::Push(stream)) => figure(stream),
            _ => 0,
        }
    }
}

#[pymethods]
impl MessageStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> GlueResult<ConsumedBatch> {
        let next = step(py, &self.inner, |mut stream| async move {
            let next = stream.next_batch().await;
            (stream, next)
        })?;
        next.map(|batch| ConsumedBatch {
            inner: Arc::new(batch),
        })
        .ok_or_else(|| PyStopIteration::new_err(()).into())
    }

    /// Flow-control answers sent so far (push consumers; with flow-control acking,
    /// the ack messages). Always 0 for pull consumers.
    #[getter]
    fn flow_control_answers(&self) -> u64 {
        self.push_figure(PushStream::flow_control_answers)
    }

    /// Resets of a flow-control push consumer to its ack floor after it fell out of
    /// step with the server (a lost delivery, a restarted server). Always 0 for pull
    /// consumers.
    #[getter]
    fn consumer_resets(&self) -> u64 {
        self.push_figure(PushStream::consumer_resets)
    }

    fn close(&self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}
