//! `PullConsumer`, `ConsumedBatch` and `MessageStream`: durable pull consumers.

use std::sync::Arc;

use jetstream_arrow_core::connection::Connection;
use jetstream_arrow_core::consume::durable::{
    AckKind, AckPolicy, ConsumeOptions, ConsumedBatch as CoreBatch, DurableConsumer, FetchOptions,
    MessageStream as CoreStream,
};
use jetstream_arrow_core::consume::pull::PriorityGroup;
use jetstream_arrow_core::consume::push::PushStream;
use jetstream_arrow_core::Error;
use pyo3::prelude::*;
use pyo3_arrow::PyRecordBatch;

use crate::aio::Call;
use crate::codec::{codec_spec, resolve_consumer_codec};
use crate::errors::GlueResult;
use crate::options::read_declared;
use crate::runtime::{Slot, Steps};
use jetstream_arrow_core::defaults;
use jetstream_arrow_core::options::values::{opt_seconds, seconds};

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
        priority: Option<PriorityGroup>,
    ) -> GlueResult<Self> {
        let policy = ack_policy.map(AckPolicy::parse).transpose()?;
        Ok(Self {
            inner: DurableConsumer::bind(conn, stream, name, policy)?.with_priority(priority)?,
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

    /// The pin this binding holds in its `pinned_client` priority group, if any.
    #[getter]
    fn pin_id(&self) -> Option<String> {
        self.inner.pin_id()
    }

    /// One pull request as `options` (a `jetstream_arrow.FetchOptions`) say, payloads
    /// decoded by `codec`.
    #[pyo3(signature = (options, codec=None))]
    fn fetch(
        &self,
        options: &Bound<'_, PyAny>,
        codec: Option<&Bound<'_, PyAny>>,
    ) -> GlueResult<Call> {
        let options: FetchOptions = read_declared(options, "fetch")?;
        let values = codec_spec(codec)?;
        // The binding adds its own priority group (DurableConsumer::fetch).
        let request = options.request();
        let include_headers = options.include_headers;
        let consumer = self.inner.clone();
        Ok(Call::new(async move {
            let values =
                resolve_consumer_codec(consumer.connection(), &consumer.stream, values).await?;
            let batch = consumer
                .fetch(&request, include_headers, values.as_ref())
                .await?;
            Ok::<_, Error>(ConsumedBatch {
                inner: Arc::new(batch),
            })
        }))
    }

    /// Continuous consumption as `options` (a `jetstream_arrow.ConsumeOptions`) say.
    #[pyo3(signature = (options, codec=None))]
    fn messages(
        &self,
        options: &Bound<'_, PyAny>,
        codec: Option<&Bound<'_, PyAny>>,
    ) -> GlueResult<Call> {
        let mut options: ConsumeOptions = read_declared(options, "consume")?;
        let values = codec_spec(codec)?;
        let consumer = self.inner.clone();
        Ok(Call::new(async move {
            options.values =
                resolve_consumer_codec(consumer.connection(), &consumer.stream, values).await?;
            let stream = consumer.messages(options).await?;
            Ok::<_, Error>(MessageStream::new(Deliveries::Pull(Box::new(stream))))
        }))
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

    /// The call sending acks of `kind`.
    fn send(&self, rows: Option<Vec<usize>>, kind: AckKind) -> Call {
        let batch = self.inner.clone();
        Call::new(async move { batch.acknowledge(rows.as_deref(), kind).await })
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
    fn ack(&self, rows: Option<Vec<usize>>) -> Call {
        self.send(rows, AckKind::Ack)
    }

    #[pyo3(signature = (rows=None, timeout=defaults::ACK_SYNC_TIMEOUT.as_secs_f64()))]
    fn ack_sync(&self, rows: Option<Vec<usize>>, timeout: f64) -> GlueResult<Call> {
        let timeout = seconds(timeout, "timeout")?;
        let batch = self.inner.clone();
        Ok(Call::new(async move {
            batch.ack_sync(rows.as_deref(), timeout).await
        }))
    }

    #[pyo3(signature = (rows=None, delay=None))]
    fn nak(&self, rows: Option<Vec<usize>>, delay: Option<f64>) -> GlueResult<Call> {
        let delay = opt_seconds(delay, "delay")?;
        Ok(self.send(rows, AckKind::Nak { delay }))
    }

    #[pyo3(signature = (rows=None, reason=None))]
    fn term(&self, rows: Option<Vec<usize>>, reason: Option<String>) -> Call {
        self.send(rows, AckKind::Term { reason })
    }

    #[pyo3(signature = (rows=None))]
    fn in_progress(&self, rows: Option<Vec<usize>>) -> Call {
        self.send(rows, AckKind::InProgress)
    }
}

/// Where a `MessageStream`'s batches come from.
pub enum Deliveries {
    Pull(Box<CoreStream>),
    Push(Box<PushStream>),
}

impl Steps for Deliveries {
    type Item = CoreBatch;

    async fn next_item(&mut self) -> Result<Option<CoreBatch>, Error> {
        match self {
            Self::Pull(stream) => stream.next_batch().await.map(Some),
            Self::Push(stream) => stream.next_batch().await.map(Some),
        }
    }

    // Dropping a stream stops it (a push stream unsubscribes).
    async fn close(&mut self) {}

    /// A push stream's flow-control answers and consumer resets; 0 for pull streams.
    fn figures(&self) -> [u64; 2] {
        match self {
            Self::Pull(_) => [0, 0],
            Self::Push(stream) => [stream.flow_control_answers(), stream.consumer_resets()],
        }
    }
}

/// Continuous consumption, pull or push, a `ConsumedBatch` at a time.
#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct MessageStream {
    inner: Slot<Deliveries>,
}

impl MessageStream {
    pub fn new(deliveries: Deliveries) -> Self {
        Self {
            inner: Slot::new(deliveries),
        }
    }
}

#[pymethods]
impl MessageStream {
    /// The next batch; None once closed. Interrupted (Ctrl-C, a cancelled asyncio
    /// task), it ends the stream: what it had taken is delivered again after the
    /// consumer's ack wait.
    fn next_batch(&self) -> Call {
        let next = self.inner.next();
        Call::new(async move {
            Ok::<_, Error>(next.await?.map(|batch| ConsumedBatch::new(Arc::new(batch))))
        })
    }

    /// Flow-control answers sent so far (push consumers; with flow-control acking,
    /// the ack messages). Always 0 for pull consumers.
    #[getter]
    fn flow_control_answers(&self) -> u64 {
        self.inner.figure(0)
    }

    /// Resets of a flow-control push consumer to its ack floor after it fell out of
    /// step with the server (a lost delivery, a restarted server). Always 0 for pull
    /// consumers.
    #[getter]
    fn consumer_resets(&self) -> u64 {
        self.inner.figure(1)
    }

    /// Stop consuming (a running step ends first).
    fn close(&self) -> Call {
        let closing = self.inner.close();
        Call::new(async move {
            closing.await;
            Ok::<_, Error>(())
        })
    }
}
