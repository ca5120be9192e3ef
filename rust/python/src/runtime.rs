//! One tokio runtime per process, created on first use and rebuilt in a forked
//! child (PySpark forks its workers; a runtime's threads do not survive a fork).
//! Waits release the GIL and, on the main thread, wake every 50 ms to let Ctrl-C
//! interrupt them.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jetstream_arrow_core::Error;
use pyo3::prelude::*;
use tokio::runtime::Runtime;

static RUNTIME: Mutex<Option<(u32, Arc<Runtime>)>> = Mutex::new(None);

/// The runtime of this process.
pub fn runtime() -> Arc<Runtime> {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((owner, rt)) = slot.as_ref() {
        if *owner == pid {
            return rt.clone();
        }
        // Inherited from the parent through fork: its worker threads do not exist
        // here, so dropping it could block forever. Leak it and start over.
        if let Some((_, inherited)) = slot.take() {
            std::mem::forget(inherited);
        }
    }
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("jetstream-arrow")
            .enable_all()
            .build()
            .expect("a tokio runtime starts"),
    );
    *slot = Some((pid, rt.clone()));
    rt
}

/// How often a wait on the main thread wakes to let Python run its signal handlers
/// (Ctrl-C).
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(50);
/// How long an interrupted wait lets its task end before it raises.
const ABORT_GRACE: Duration = Duration::from_secs(10);

/// A wait that did not give its task's output: the signal handler's exception (or
/// the task's panic), and the output when the interrupted task still ended in time.
pub struct Unfinished<T> {
    pub error: PyErr,
    pub output: Option<T>,
}

/// Run `future` on the runtime's workers (beside the connection's own tasks, so
/// wakeups stay on those threads) and wait for it with the GIL released. Ctrl-C, or
/// any Python signal handler that raises, interrupts the wait: it first sets `stop`
/// (when given) so that the task ends by itself, e.g. a publish taking no more rows
/// and seeing the acks of those it took; without `stop` the task is aborted.
///
/// Either way the raise waits for the task to end (within [`ABORT_GRACE`]; a second
/// Ctrl-C stops waiting): a task may be inside Python on a runtime thread, pulling
/// the next batch of an input backed by a generator. Raised at once, the exception
/// could end the interpreter while that thread is still in Python, and a thread
/// that takes the GIL back once the interpreter is finalizing crashes the process.
/// For the same reason only the main thread wakes to check signals (Python runs
/// handlers nowhere else): a daemon thread waiting here while the interpreter exits
/// would otherwise take the GIL every 50 ms.
pub fn wait_or_stop<F>(
    py: Python<'_>,
    future: F,
    stop: Option<Arc<AtomicBool>>,
) -> Result<F::Output, Unfinished<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let checks_signals = on_main_thread(py);
    let rt = runtime();
    let handle = rt.spawn(future);
    let abort = handle.abort_handle();
    let (joined, interrupted) = py.detach(|| {
        rt.block_on(async {
            tokio::pin!(handle);
            let interrupted = loop {
                tokio::select! {
                    out = &mut handle => return (Some(out), None),
                    _ = tokio::time::sleep(SIGNAL_CHECK_INTERVAL), if checks_signals => {
                        if let Err(e) = Python::attach(|py| py.check_signals()) {
                            break e;
                        }
                    }
                }
            };
            match &stop {
                Some(stop) => stop.store(true, Ordering::SeqCst),
                None => abort.abort(),
            }
            let grace = tokio::time::sleep(ABORT_GRACE);
            tokio::pin!(grace);
            let out = loop {
                tokio::select! {
                    out = &mut handle => break Some(out),
                    _ = &mut grace => break None,
                    _ = tokio::time::sleep(SIGNAL_CHECK_INTERVAL) => {
                        if Python::attach(|py| py.check_signals()).is_err() {
                            break None;
                        }
                    }
                }
            };
            if out.is_none() {
                abort.abort();
            }
            (out, Some(interrupted))
        })
    });
    let panicked = |e: tokio::task::JoinError| {
        pyo3::exceptions::PyRuntimeError::new_err(format!("internal task failed: {e}"))
    };
    match (joined, interrupted) {
        (Some(Ok(output)), None) => Ok(output),
        (Some(Err(e)), None) => Err(Unfinished {
            error: panicked(e),
            output: None,
        }),
        (joined, Some(error)) => Err(Unfinished {
            error,
            output: joined.and_then(Result::ok),
        }),
        (None, None) => unreachable!("a wait ends with the task's output or a signal"),
    }
}

/// Whether this is the interpreter's main thread, the one Python runs signal
/// handlers on (asked each time: after a fork the main thread is the forking one).
fn on_main_thread(py: Python<'_>) -> bool {
    let ask = || -> PyResult<bool> {
        let threading = py.import("threading")?;
        let main = threading.call_method0("main_thread")?.getattr("ident")?;
        main.eq(threading.call_method0("get_ident")?)
    };
    // Unanswerable (an interpreter shutting down): checking is what waits did before.
    ask().unwrap_or(true)
}

/// Make a blocking iterator (e.g. an Arrow C stream that may call into Python)
/// safe to drive from a runtime worker: other tasks move off the thread while it
/// blocks.
pub struct BlockingIter<I>(pub I);

impl<I: Iterator> Iterator for BlockingIter<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        tokio::task::block_in_place(|| self.0.next())
    }
}

/// What a native iterator steps through: a read's batches, a consumer's deliveries.
pub trait Steps: Send + 'static {
    type Item: Send + 'static;
    /// The next item; None at the end.
    fn next_item(&mut self) -> impl Future<Output = Result<Option<Self::Item>, Error>> + Send;
    /// Release what the iterator holds on the server (a read's consumer).
    fn close(&mut self) -> impl Future<Output = ()> + Send;
    /// Two counters worth reading while a step runs and after the end.
    fn figures(&self) -> [u64; 2];
}

struct Stepping<S> {
    state: S,
    /// A step began and did not finish: it was aborted (Ctrl-C) or its asyncio task
    /// cancelled. What it had taken is gone, so the iterator ends rather than skip it.
    interrupted: bool,
}

/// The state of a native iterator, shared by its blocking steps (`wait`) and its
/// asyncio ones. A step holds the lock while it runs, so a step that is dropped
/// midway (an abort, a cancelled task) leaves the state in place for `close` to
/// release. A `close` stops a running step (which may wait long for a message on an
/// idle stream) and then closes the state.
pub struct Slot<S> {
    inner: Arc<tokio::sync::Mutex<Option<Stepping<S>>>>,
    figures: Arc<[AtomicU64; 2]>,
    /// Told by `close`: the running step stops and the iterator ends.
    closing: Arc<tokio::sync::Notify>,
}

impl<S: Steps> Slot<S> {
    pub fn new(state: S) -> Self {
        Self {
            inner: Arc::new(tokio::sync::Mutex::new(Some(Stepping {
                state,
                interrupted: false,
            }))),
            figures: Arc::default(),
            closing: Arc::default(),
        }
    }

    /// One step: the next item, or None once ended, closed or interrupted (the state
    /// is then closed and released).
    pub fn next(&self) -> impl Future<Output = Result<Option<S::Item>, Error>> + Send + 'static {
        let inner = self.inner.clone();
        let figures = self.figures.clone();
        let closing = self.closing.clone();
        async move {
            let mut guard = inner.lock_owned().await;
            let Some(stepping) = guard.as_mut() else {
                return Ok(None);
            };
            if stepping.interrupted {
                stepping.state.close().await;
                *guard = None;
                return Ok(None);
            }
            stepping.interrupted = true;
            let next = tokio::select! {
                next = stepping.state.next_item() => next,
                () = closing.notified() => {
                    // `close` waits for the lock this step holds: end here.
                    stepping.state.close().await;
                    *guard = None;
                    return Ok(None);
                }
            };
            stepping.interrupted = false;
            for (slot, value) in figures.iter().zip(stepping.state.figures()) {
                slot.store(value, Ordering::Relaxed);
            }
            if let Ok(None) = next {
                stepping.state.close().await;
                *guard = None;
            }
            next
        }
    }

    /// Close the state (once a running step has finished or been dropped).
    pub fn close(&self) -> impl Future<Output = ()> + Send + 'static {
        let inner = self.inner.clone();
        // A permit, kept if no step is running: the next one ends at once.
        self.closing.notify_one();
        async move {
            let taken = inner.lock().await.take();
            if let Some(mut stepping) = taken {
                stepping.state.close().await;
            }
        }
    }

    /// Counter `index` of [`Steps::figures`] as of the last step.
    pub fn figure(&self, index: usize) -> u64 {
        self.figures[index].load(Ordering::Relaxed)
    }
}
