//! `Client`, `Publisher` and `PublishOutcome`: the connection and the publish path.
//!
//! One module because a `Publisher` and its outcomes live and die with the `Client`'s
//! connection, and every method here is a thin call into the core.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use jetstream_arrow_core::connection::Connection;
use jetstream_arrow_core::consume::pull::PriorityGroup;
use jetstream_arrow_core::publish::{PublishOutcome as CoreOutcome, Publisher as CorePublisher};
use jetstream_arrow_core::read::msg_get;
use jetstream_arrow_core::read::{FollowOptions, OrderedStream as CoreOrderedStream};
use jetstream_arrow_core::Error;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3_arrow::input::AnyRecordBatch;
use pyo3_arrow::{PyArray, PyRecordBatch};

use crate::aio::{Call, StopSignal, Stoppable};
use crate::codec::codec_spec;
use crate::consumer::PullConsumer;
use crate::errors::{GlueError, GlueResult};
use crate::options::{connect_config, read_declared};
use crate::push::PushConsumer;
use crate::reader::{Batches, ReadBatches};
use crate::runtime::BlockingIter;
use jetstream_arrow_core::options::values::{opt_count, opt_seconds};
use jetstream_arrow_core::publish::PublishOptions;
use jetstream_arrow_core::read::ReadOptions;

/// A live connection. Not picklable, and usable only in the process that made it.
#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct Client {
    conn: Mutex<Option<Connection>>,
    pid: u32,
}

impl Client {
    /// The connection, or a clear error when closed or inherited through fork.
    pub fn connection(&self) -> Result<Connection, Error> {
        if std::process::id() != self.pid {
            return Err(Error::connection(format!(
                "this connection was opened in process {} and this is process {} (a fork): \
                 connect again in this process",
                self.pid,
                std::process::id()
            )));
        }
        self.conn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| Error::connection("the client is closed"))
    }
}

impl Client {
    /// The connection to close: taken out, so the client is closed from now on
    /// (None when it was already, or when it belongs to the parent of a fork).
    fn take(&self) -> Option<Connection> {
        let taken = self.conn.lock().unwrap_or_else(|e| e.into_inner()).take();
        taken.filter(|_| std::process::id() == self.pid)
    }
}

/// Open an ordered consumer of `stream`.
async fn following(
    conn: Connection,
    stream: String,
    options: FollowOptions,
) -> Result<ReadBatches, Error> {
    let inner = CoreOrderedStream::open(conn, &stream, options).await?;
    let schema = inner.schema();
    Ok(ReadBatches::new(Batches::Follow(Box::new(inner)), schema))
}

#[pymethods]
impl Client {
    #[staticmethod]
    fn connect(options: &Bound<'_, PyAny>) -> GlueResult<Call> {
        let config = connect_config(options)?;
        Ok(Call::new(async move {
            let conn = Connection::connect(&config).await?;
            Ok::<_, Error>(Self {
                conn: Mutex::new(Some(conn)),
                pid: std::process::id(),
            })
        }))
    }

    #[getter]
    fn api_prefix(&self) -> GlueResult<String> {
        Ok(self.connection()?.api_prefix)
    }

    fn server_info<'py>(&self, py: Python<'py>) -> GlueResult<Bound<'py, PyDict>> {
        let info = self.connection()?.client.server_info();
        let d = PyDict::new(py);
        d.set_item("server_id", info.server_id)?;
        d.set_item("server_name", info.server_name)?;
        d.set_item("version", info.version)?;
        d.set_item("max_payload", info.max_payload)?;
        d.set_item("headers", info.headers)?;
        d.set_item("jetstream", info.jetstream)?;
        d.set_item("domain", info.domain)?;
        d.set_item("cluster", info.cluster)?;
        d.set_item("client_id", info.client_id)?;
        Ok(d)
    }

    #[pyo3(signature = (subject, body=None, timeout=None, resume_timeout=None))]
    fn api_request(
        &self,
        subject: &str,
        body: Option<Vec<u8>>,
        timeout: Option<f64>,
        resume_timeout: Option<f64>,
    ) -> GlueResult<Call> {
        let conn = self.connection()?;
        let timeout = opt_seconds(timeout, "timeout")?;
        let within = opt_seconds(resume_timeout, "resume_timeout")?;
        let body = bytes::Bytes::from(body.unwrap_or_default());
        let subject = subject.to_string();
        Ok(Call::new(async move {
            let reply = conn
                .api_request_patiently(&subject, body, timeout, within)
                .await?;
            Ok::<_, Error>(reply.to_vec())
        }))
    }

    /// A publisher sending as `options` (a `jetstream_arrow.PublishOptions`) say,
    /// the input's value columns encoded by `codec` (a `jetstream_arrow.ValueCodec`).
    #[pyo3(signature = (options, codec=None))]
    fn publisher(
        &self,
        options: &Bound<'_, PyAny>,
        codec: Option<&Bound<'_, PyAny>>,
    ) -> GlueResult<Call> {
        let mut options: PublishOptions = read_declared(options, "publish")?;
        options.values = codec_spec(codec)?;
        let conn = self.connection()?;
        Ok(Call::new(async move {
            Ok::<_, Error>(Publisher::new(CorePublisher::new(conn, options).await?))
        }))
    }

    /// A range read of `stream` as `options` (a `jetstream_arrow.ReadOptions`) say,
    /// payloads decoded by `codec` (a `jetstream_arrow.ValueCodec`).
    #[pyo3(signature = (stream, options, codec=None))]
    fn read(
        &self,
        stream: &str,
        options: &Bound<'_, PyAny>,
        codec: Option<&Bound<'_, PyAny>>,
    ) -> GlueResult<Call> {
        let mut options: ReadOptions = read_declared(options, "read")?;
        options.values = codec_spec(codec)?;
        Ok(Call::new(crate::reader::opening(
            self.connection()?,
            stream,
            options,
        )))
    }

    /// An open-ended ordered consumer of `stream` as `options` (a
    /// `jetstream_arrow.FollowOptions`) say, payloads decoded by `codec`.
    #[pyo3(signature = (stream, options, codec=None))]
    fn follow(
        &self,
        stream: &str,
        options: &Bound<'_, PyAny>,
        codec: Option<&Bound<'_, PyAny>>,
    ) -> GlueResult<Call> {
        let mut options: FollowOptions = read_declared(options, "follow")?;
        options.start()?;
        options.values = codec_spec(codec)?;
        Ok(Call::new(following(
            self.connection()?,
            stream.to_string(),
            options,
        )))
    }

    #[pyo3(signature = (
        stream, name, *, ack_policy=None, group=None, min_pending=None,
        min_ack_pending=None, priority=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn pull_consumer(
        &self,
        stream: &str,
        name: &str,
        ack_policy: Option<&str>,
        group: Option<String>,
        min_pending: Option<i128>,
        min_ack_pending: Option<i128>,
        priority: Option<i128>,
    ) -> GlueResult<PullConsumer> {
        let priority = match group {
            Some(group) => Some(PriorityGroup {
                group,
                min_pending: opt_count(min_pending, "min_pending")?,
                min_ack_pending: opt_count(min_ack_pending, "min_ack_pending")?,
                priority: opt_count(priority, "priority")?,
            }),
            None => {
                for (given, option) in [
                    (min_pending.is_some(), "min_pending"),
                    (min_ack_pending.is_some(), "min_ack_pending"),
                    (priority.is_some(), "priority"),
                ] {
                    if given {
                        return Err(Error::bad_input(format!(
                            "option '{option}' is a priority group's: give 'group' too"
                        ))
                        .into());
                    }
                }
                None
            }
        };
        PullConsumer::bind(self.connection()?, stream, name, ack_policy, priority)
    }

    /// A durable push consumer (its info looked up unless `deliver_subject` is given).
    #[pyo3(signature = (
        stream, name, *, deliver_subject=None, deliver_group=None, ack_policy=None
    ))]
    fn push_consumer(
        &self,
        stream: &str,
        name: &str,
        deliver_subject: Option<String>,
        deliver_group: Option<String>,
        ack_policy: Option<&str>,
    ) -> GlueResult<Call> {
        let binding = PushConsumer::bind(
            self.connection()?,
            stream,
            name,
            deliver_subject.map(|subject| (subject, deliver_group)),
            ack_policy,
        )?;
        Ok(Call::new(binding))
    }

    /// The sequence of the first message stored at or after `time_ns` (nanoseconds
    /// since the epoch) on any of `subjects` (all when empty); None when there is none.
    /// One `STREAM.MSG.GET` per filter, asked again while the server restarts, for up
    /// to `resume_timeout` seconds (default: a read's).
    #[pyo3(signature = (stream, time_ns, subjects=Vec::new(), resume_timeout=None))]
    fn first_seq_at(
        &self,
        stream: String,
        time_ns: i64,
        subjects: Vec<String>,
        resume_timeout: Option<f64>,
    ) -> GlueResult<Call> {
        let within = opt_seconds(resume_timeout, "resume_timeout")?
            .unwrap_or(jetstream_arrow_core::defaults::RESUME_TIMEOUT);
        let conn = self.connection()?;
        Ok(Call::new(async move {
            msg_get::first_seq_at(&conn, &stream, time_ns, &subjects, within).await
        }))
    }

    #[pyo3(signature = (timeout=None))]
    fn flush(&self, timeout: Option<f64>) -> GlueResult<Call> {
        let conn = self.connection()?;
        let timeout = opt_seconds(timeout, "timeout")?;
        Ok(Call::new(async move { conn.flush(timeout).await }))
    }

    /// Closed from now on; the call ends once the connection has flushed and closed.
    fn close(&self) -> Call {
        let taken = self.take();
        Call::new(async move {
            if let Some(conn) = taken {
                conn.close().await;
            }
            Ok::<_, Error>(())
        })
    }

    fn is_closed(&self) -> bool {
        self.conn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    fn __reduce__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err(
            "a jetstream_arrow connection cannot be pickled: pickle its ConnectOptions and connect again",
        ))
    }
}

/// A publisher keeping one ack window across calls. One call sends at a time: a
/// second waits for the first. A call stopped by Ctrl-C or an asyncio cancellation
/// keeps the publisher when it ends within the interrupted wait's grace; after one
/// aborted (or abandoned) the publisher is gone and the next call says it is closed.
#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct Publisher {
    inner: Arc<tokio::sync::Mutex<Option<CorePublisher>>>,
}

impl Publisher {
    fn new(inner: CorePublisher) -> Self {
        Self {
            inner: Arc::new(tokio::sync::Mutex::new(Some(inner))),
        }
    }

    /// The call publishing `data`: the publisher moves into it and comes back with
    /// the outcome. Once `stop` is set, no more rows are taken; the call then resolves
    /// to the outcome of the rows it took (see `aio.rs`).
    fn call(
        &self,
        data: AnyRecordBatch,
        subject: Option<String>,
        stop: Arc<AtomicBool>,
        stop_check: fn(BlockingRows, Arc<AtomicBool>) -> Stoppable<BlockingRows>,
    ) -> GlueResult<impl Future<Output = GlueResult<PublishOutcome>> + Send + 'static> {
        let reader = data.into_reader()?;
        let schema = reader.schema();
        let slot = self.inner.clone();
        let batches: BlockingRows =
            Box::new(BlockingIter(reader).map(|b: Result<RecordBatch, _>| b.map_err(Error::from)));
        Ok(async move {
            let mut guard = slot.lock_owned().await;
            let mut publisher = guard
                .take()
                .ok_or_else(|| Error::bad_input("the publisher is closed"))?;
            let batches = stop_check(batches, stop.clone());
            let (outcome, error) = publisher.publish(schema, batches, subject).await;
            *guard = Some(publisher);
            let stopped = stop.load(Ordering::SeqCst);
            let outcome = PublishOutcome { inner: outcome };
            match error {
                Some(e) if !stopped => {
                    let result = Python::attach(|py| Py::new(py, outcome))?.into_any();
                    Err(GlueError::with_result(e, result))
                }
                _ => Ok(outcome),
            }
        })
    }
}

/// A publish's input as the engine pulls it: batches from an Arrow stream that may call
/// into Python (a generator), each pull on a runtime thread.
type BlockingRows = Box<dyn Iterator<Item = Result<RecordBatch, Error>> + Send>;

#[pymethods]
impl Publisher {
    /// Without `stop`, Ctrl-C during `wait()` stops the publish taking rows (before
    /// the input's next batch); the rows taken are acknowledged, within the
    /// interrupted wait's grace, and their outcome rides on the `KeyboardInterrupt`
    /// as `result`. With `stop` (an asyncio publish, whose task may be cancelled at
    /// any row), the input is taken in slices of at most 1,024 rows, and once `stop`
    /// is set the call resolves to the outcome of the rows it took, each stored, a
    /// duplicate or failed.
    #[pyo3(signature = (data, subject=None, stop=None))]
    fn publish(
        &self,
        data: AnyRecordBatch,
        subject: Option<String>,
        stop: Option<&StopSignal>,
    ) -> GlueResult<Call> {
        let (stop, stop_check): (_, fn(_, _) -> _) = match stop {
            Some(signal) => (signal.flag(), Stoppable::new),
            None => (Arc::new(AtomicBool::new(false)), Stoppable::between_batches),
        };
        let call = self.call(data, subject, stop.clone(), stop_check)?;
        Ok(Call::stopped_by(call, stop))
    }

    fn close(&self) {
        // A call in progress keeps the publisher until it ends.
        if let Ok(mut guard) = self.inner.try_lock() {
            guard.take();
        }
    }
}

/// The outcome of one publish call, row by row.
#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct PublishOutcome {
    inner: CoreOutcome,
}

#[pymethods]
impl PublishOutcome {
    #[getter]
    fn stored(&self) -> usize {
        self.inner.stored
    }
    #[getter]
    fn duplicates(&self) -> usize {
        self.inner.duplicates
    }
    #[getter]
    fn failed(&self) -> usize {
        self.inner.failed()
    }
    #[getter]
    fn rows(&self) -> usize {
        self.inner.rows()
    }
    #[getter]
    fn resends(&self) -> usize {
        self.inner.resends
    }
    #[getter]
    fn late_replies(&self) -> usize {
        self.inner.late_replies
    }
    fn acks(&self) -> PyRecordBatch {
        PyRecordBatch::new(self.inner.to_record_batch())
    }
    /// Each row's JetStream error code: uint32, null unless the server refused the
    /// row with one.
    fn error_codes(&self) -> PyArray {
        PyArray::from_array_ref(Arc::new(self.inner.error_codes()))
    }
}
