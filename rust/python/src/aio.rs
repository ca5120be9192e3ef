//! The one way a native call that waits reaches Python: a [`Call`], which the caller
//! either waits for (`wait()`: the GIL released, Ctrl-C interrupting it, `runtime.rs`)
//! or awaits (`await call`: an asyncio future of the running event loop). Every
//! method of the glue that waits returns one, so each is written and declared once
//! for both facades.
//!
//! Awaiting goes through `pyo3-async-runtimes`' generic bridge over this process's
//! runtime (`runtime.rs`): the future runs as a task on the runtime's workers, and the
//! asyncio future handed to Python is completed on its event loop
//! (`call_soon_threadsafe`) with the value, or the package's exception. No thread
//! waits for it. Cancelling the asyncio future drops the task's future.
//!
//! A publish is the one call that does not stop by being dropped: it takes a
//! [`StopSignal`] and, once signalled, stops taking rows, sees the acks of those in
//! flight and resolves to what became of each row taken (`Publisher.publish`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use arrow_array::RecordBatch;
use jetstream_arrow_core::{Error, ErrorKind};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use pyo3_async_runtimes::generic::{future_into_py, ContextExt, JoinError, Runtime};
use pyo3_async_runtimes::TaskLocals;

use crate::errors::{GlueError, GlueResult};
use crate::runtime::{runtime, wait_or_stop, Unfinished};

/// The process's runtime (rebuilt after fork) as `pyo3-async-runtimes` sees it.
pub struct CoreRuntime;

/// A task of [`CoreRuntime`].
pub struct Joined(tokio::task::JoinHandle<()>);

/// How a task of [`CoreRuntime`] failed.
pub struct JoinFailure(tokio::task::JoinError);

impl JoinError for JoinFailure {
    fn is_panic(&self) -> bool {
        self.0.is_panic()
    }

    fn into_panic(self) -> Box<dyn std::any::Any + Send + 'static> {
        self.0.into_panic()
    }
}

impl Future for Joined {
    type Output = Result<(), JoinFailure>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.map_err(JoinFailure))
    }
}

impl Runtime for CoreRuntime {
    type JoinError = JoinFailure;
    type JoinHandle = Joined;

    fn spawn<F>(fut: F) -> Joined
    where
        F: Future<Output = ()> + Send + 'static,
    {
        Joined(runtime().spawn(fut))
    }

    fn spawn_blocking<F>(f: F) -> Joined
    where
        F: FnOnce() + Send + 'static,
    {
        Joined(runtime().spawn_blocking(f))
    }
}

impl ContextExt for CoreRuntime {
    // The core's futures never call back into Python coroutines, so they need no
    // task locals: the event loop is the one running where the call was made.
    fn scope<F, R>(_locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        Box::pin(fut)
    }

    fn get_task_locals() -> Option<TaskLocals> {
        None
    }
}

/// A call's value made a Python object, by whichever side holds the GIL when the
/// call ends: the waiting thread, or the event loop's completion.
type ToPython = Box<dyn for<'py> FnOnce(Python<'py>) -> PyResult<Py<PyAny>> + Send>;

/// A call's work, not started until it is waited for or awaited.
type Work = Pin<Box<dyn Future<Output = GlueResult<ToPython>> + Send>>;

/// A native call that waits: `wait()` blocks for its value (the GIL released, Ctrl-C
/// interrupting it), `await` makes it an asyncio awaitable of the running loop.
/// Either starts it, once; an error raises its class of `jetstream_arrow.exceptions`.
#[pyclass(module = "jetstream_arrow._core", frozen, generic)]
pub struct Call {
    work: Mutex<Option<Work>>,
    /// Set on Ctrl-C instead of aborting the work, which then ends by itself (a
    /// publish stops taking rows); its value rides on the exception as `result`.
    stop: Option<Arc<AtomicBool>>,
}

impl Call {
    /// The call of `future`, whose value becomes a Python object when it ends.
    pub fn new<F, T, E>(future: F) -> Self
    where
        F: Future<Output = Result<T, E>> + Send + 'static,
        E: Into<GlueError>,
        T: for<'py> IntoPyObject<'py> + Send + 'static,
    {
        let work = async move {
            let value = future.await.map_err(Into::into)?;
            let to_python: ToPython = Box::new(move |py| value.into_py_any(py));
            Ok(to_python)
        };
        Self {
            work: Mutex::new(Some(Box::pin(work))),
            stop: None,
        }
    }

    /// [`Call::new`], stopped by `stop` on Ctrl-C rather than aborted.
    pub fn stopped_by<F, T, E>(future: F, stop: Arc<AtomicBool>) -> Self
    where
        F: Future<Output = Result<T, E>> + Send + 'static,
        E: Into<GlueError>,
        T: for<'py> IntoPyObject<'py> + Send + 'static,
    {
        Self {
            stop: Some(stop),
            ..Self::new(future)
        }
    }

    fn take(&self) -> PyResult<Work> {
        self.work
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this call was already waited for or awaited"))
    }
}

/// A call's value on its way to the event loop.
struct Finished(ToPython);

impl<'py> IntoPyObject<'py> for Finished {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok((self.0)(py)?.into_bound(py))
    }
}

#[pymethods]
impl Call {
    /// Run the call and wait for its value, the GIL released.
    fn wait(&self, py: Python<'_>) -> GlueResult<Py<PyAny>> {
        match wait_or_stop(py, self.take()?, self.stop.clone()) {
            Ok(done) => {
                let to_python = done?;
                Ok(to_python(py)?)
            }
            Err(Unfinished { error, output }) => {
                // Only a stopped call ends by itself with what it did; an aborted one
                // is gone, whatever it had done.
                if let (Some(_), Some(Ok(to_python))) = (&self.stop, output) {
                    error.value(py).setattr("result", to_python(py)?)?;
                }
                Err(error.into())
            }
        }
    }

    /// Run the call as a task of the runtime: an asyncio future of the running loop.
    fn __await__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let work = self.take()?;
        let future =
            future_into_py::<CoreRuntime, _, Finished>(
                py,
                async move { Ok(Finished(work.await?)) },
            )?;
        future.call_method0("__await__")
    }
}

/// Rows an asyncio publish takes between two looks at its [`StopSignal`]: input
/// batches are cut into slices of at most this many rows (no copy).
const STOP_CHECK_ROWS: usize = 1024;

/// Asks an asyncio publish to stop taking rows (set when its task is cancelled).
#[pyclass(module = "jetstream_arrow._core", frozen)]
#[derive(Default)]
pub struct StopSignal(Arc<AtomicBool>);

impl StopSignal {
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}

#[pymethods]
impl StopSignal {
    #[new]
    fn py_new() -> Self {
        Self::default()
    }

    fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// The error that ends a stopped publish's input; the publish then resolves to its
/// outcome, not to this error.
pub fn stopped() -> Error {
    Error::new(ErrorKind::Connection, "the publish was cancelled")
}

/// The input of a publish, in slices of at most [`STOP_CHECK_ROWS`] rows (or whole
/// batches), ending in [`stopped`] once `stop` is set.
pub struct Stoppable<I> {
    input: I,
    stop: Arc<AtomicBool>,
    current: Option<(RecordBatch, usize)>,
    slice_rows: usize,
}

impl<I> Stoppable<I> {
    /// Stops within [`STOP_CHECK_ROWS`] rows: an asyncio task's cancellation is
    /// answered as soon as the rows already sent are acknowledged.
    pub fn new(input: I, stop: Arc<AtomicBool>) -> Self {
        Self {
            input,
            stop,
            current: None,
            slice_rows: STOP_CHECK_ROWS,
        }
    }

    /// Stops before the next batch of the input, the batches handed on whole (so a
    /// large batch keeps its work in bulk, such as compression ahead).
    pub fn between_batches(input: I, stop: Arc<AtomicBool>) -> Self {
        Self {
            slice_rows: usize::MAX,
            ..Self::new(input, stop)
        }
    }
}

impl<I: Iterator<Item = Result<RecordBatch, Error>>> Iterator for Stoppable<I> {
    type Item = Result<RecordBatch, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.stop.load(Ordering::SeqCst) {
            self.current = None;
            return Some(Err(stopped()));
        }
        loop {
            if let Some((batch, offset)) = &mut self.current {
                if *offset < batch.num_rows() {
                    let len = self.slice_rows.min(batch.num_rows() - *offset);
                    let slice = if len == batch.num_rows() {
                        batch.clone()
                    } else {
                        batch.slice(*offset, len)
                    };
                    *offset += len;
                    return Some(Ok(slice));
                }
                // An empty batch still goes through, so its columns are checked.
                if batch.num_rows() == 0 && *offset == 0 {
                    let empty = batch.clone();
                    self.current = None;
                    return Some(Ok(empty));
                }
            }
            match self.input.next()? {
                Ok(batch) => self.current = Some((batch, 0)),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}
