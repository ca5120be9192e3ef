//! `PullConsumer`, `ConsumedBatch` and `MessageStream`: durable pull consumers.

use std::future::Future;
use std::sync::Arc;

use jetstream_arrow_core::connection::Connection;
use jetstream_arrow_core::consume::durable::{
    AckKind, AckPolicy, ConsumeOptions, ConsumedBatch as CoreBatch, DurableConsumer, FetchOptions,
    MessageStream as CoreStream,
};
use jetstream_arrow_core::consume::pull::PriorityGroup;
use jetstream_arrow_core::consume::push::PushStream;
use jetstream_arrow_core::Error;
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3_arrow::PyRecordBatch;

use crate::aio::awaitable;
use crate::codec::{codec_spec, resolve_consumer_codec};
use crate::errors::GlueResult;
use crate::options::read_declared;
use crate::runtime::{step, wait, Slot, Steps};
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
    /// decoded by `codec`; with `asyncio`, an asyncio awaitable of its batch.
    #[pyo3(signature = (options, codec=None, *, asyncio=false))]
    fn fetch<'py>(
        &self,
        py: Python<'py>,
        options: &Bound<'py, PyAny>,
        codec: Option<&Bound<'py, PyAny>>,
        asyncio: bool,
    ) -> GlueResult<Bound<'py, PyAny>> {
        let options: FetchOptions = read_declared(options, "fetch")?;
        let values = codec_spec(codec)?;
        // The binding adds its own priority group (DurableConsumer::fetch).
        let request = options.request();
        let include_headers = options.include_headers;
        let consumer = self.inner.clone();
        let fetching = async move {
            let values =
                resolve_consumer_codec(consumer.connection(), &consumer.stream, values).await?;
            let batch = consumer
                .fetch(&request, include_headers, values.as_ref())
                .await?;
            Ok::<_, Error>(ConsumedBatch {
                inner: Arc::new(batch),
            })
        };
        if asyncio {
            return Ok(awaitable(py, async move { Ok(fetching.await?) })?);
        }
        Ok(Bound::new(py, wait(py, fetching)??)?.into_any())
    }

    /// Continuous consumption as `options` (a `jetstream_arrow.ConsumeOptions`) say;
    /// with `asyncio`, an asyncio awaitable of the stream.
    #[pyo3(signature = (options, codec=None, asyncio=false))]
    fn messages<'py>(
        &self,
        py: Python<'py>,
        options: &Bound<'py, PyAny>,
        codec: Option<&Bound<'py, PyAny>>,
        asyncio: bool,
    ) -> GlueResult<Bound<'py, PyAny>> {
        let mut options: ConsumeOptions = read_declared(options, "consume")?;
        let values = codec_spec(codec)?;
        let consumer = self.inner.clone();
        let opening = async move {
            options.values =
                resolve_consumer_codec(consumer.connection(), &consumer.stream, values).await?;
            let stream = consumer.messages(options).await?;
            Ok::<_, Error>(MessageStream::new(Deliveries::Pull(Box::new(stream))))
        };
        if asyncio {
            return Ok(awaitable(py, async move { Ok(opening.await?) })?);
        }
        Ok(Bound::new(py, wait(py, opening)??)?.into_any())
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

    /// Send acks of `kind`: waited for, or with `asyncio` an asyncio awaitable.
    fn send<'py>(
        &self,
        py: Python<'py>,
        rows: Option<Vec<usize>>,
        kind: AckKind,
        asyncio: bool,
    ) -> GlueResult<Bound<'py, PyAny>> {
        let batch = self.inner.clone();
        let sending = async move { batch.acknowledge(rows.as_deref(), kind).await };
        done(py, sending, asyncio)
    }
}

/// `future` waited for (None), or with `asyncio` an asyncio awaitable of it.
fn done<'py>(
    py: Python<'py>,
    future: impl Future<Output = Result<(), Error>> + Send + 'static,
    asyncio: bool,
) -> GlueResult<Bound<'py, PyAny>> {
    if asyncio {
        return Ok(awaitable(py, async move { Ok(future.await?) })?);
    }
    wait(py, future)??;
    Ok(py.None().into_bound(py))
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

    #[pyo3(signature = (rows=None, *, asyncio=false))]
    fn ack<'py>(
        &self,
        py: Python<'py>,
        rows: Option<Vec<usize>>,
        asyncio: bool,
    ) -> GlueResult<Bound<'py, PyAny>> {
        self.send(py, rows, AckKind::Ack, asyncio)
    }

    #[pyo3(signature = (
        rows=None, timeout=defaults::ACK_SYNC_TIMEOUT.as_secs_f64(), *, asyncio=false
    ))]
    fn ack_sync<'py>(
        &self,
        py: Python<'py>,
        rows: Option<Vec<usize>>,
        timeout: f64,
        asyncio: bool,
    ) -> GlueResult<Bound<'py, PyAny>> {
        let timeout = seconds(timeout, "timeout")?;
        let batch = self.inner.clone();
        let acking = async move { batch.ack_sync(rows.as_deref(), timeout).await };
        done(py, acking, asyncio)
    }

    #[pyo3(signature = (rows=None, delay=None, *, asyncio=false))]
    fn nak<'py>(
        &self,
        py: Python<'py>,
        rows: Option<Vec<usize>>,
        delay: Option<f64>,
        asyncio: bool,
    ) -> GlueResult<Bound<'py, PyAny>> {
        let delay = opt_seconds(delay, "delay")?;
        self.send(py, rows, AckKind::Nak { delay }, asyncio)
    }

    #[pyo3(signature = (rows=None, reason=None, *, asyncio=false))]
    fn term<'py>(
        &self,
        py: Python<'py>,
        rows: Option<Vec<usize>>,
        reason: Option<String>,
        asyncio: bool,
    ) -> GlueResult<Bound<'py, PyAny>> {
        self.send(py, rows, AckKind::Term { reason }, asyncio)
    }

    #[pyo3(signature = (rows=None, *, asyncio=false))]
    fn in_progress<'py>(
        &self,
        py: Python<'py>,
        rows: Option<Vec<usize>>,
        asyncio: bool,
    ) -> GlueResult<Bound<'py, PyAny>> {
        self.send(py, rows, AckKind::InProgress, asyncio)
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

/// Continuous consumption, pull or push; `__next__` yields the next `ConsumedBatch`.
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
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> GlueResult<ConsumedBatch> {
        step(py, self.inner.next())?
            .map(|batch| ConsumedBatch::new(Arc::new(batch)))
            .ok_or_else(|| PyStopIteration::new_err(()).into())
    }

    /// The next batch as an asyncio awaitable; None once closed. Cancelled, it ends
    /// the stream (what it had taken is delivered again after the consumer's ack wait).
    fn next_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let next = self.inner.next();
        awaitable(py, async move {
            Ok(next.await?.map(|batch| ConsumedBatch::new(Arc::new(batch))))
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

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        wait(py, self.inner.close())
    }

    /// `close` as an asyncio awaitable.
    fn close_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let closing = self.inner.close();
        awaitable(py, async move {
            closing.await;
            Ok(())
        })
    }
}
