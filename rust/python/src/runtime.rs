//! One tokio runtime per process, created on first use and rebuilt in a forked
//! child (PySpark forks its workers; a runtime's threads do not survive a fork).
//! Waits release the GIL and wake every 50 ms to let Ctrl-C interrupt them.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jetstream_arrow_core::Error;
use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::errors::GlueResult;

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

/// Run `future` on the runtime's workers (beside the connection's own tasks, so
/// wakeups stay on those threads) and wait for it with the GIL released. Ctrl-C,
/// or any Python signal handler that raises, aborts the task and raises.
pub fn wait<F>(py: Python<'_>, future: F) -> PyResult<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let rt = runtime();
    let handle = rt.spawn(future);
    let abort = handle.abort_handle();
    let joined = py.detach(|| {
        rt.block_on(async {
            tokio::pin!(handle);
            loop {
                tokio::select! {
                    out = &mut handle => return Ok(out),
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {
                        if let Err(e) = Python::attach(|py| py.check_signals()) {
                            abort.abort();
                            return Err(e);
                        }
                    }
                }
            }
        })
    })?;
    joined.map_err(|e| {
        pyo3::exceptions::PyRuntimeError::new_err(format!("internal task failed: {e}"))
    })
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

/// One step of a stateful native iterator: take the state out of `slot`, run `step` on
/// the runtime with the GIL released, and put the state back. None when the slot is
/// empty (closed, or lost to an interrupt, after which iteration ends).
pub fn step<S, T, F, Fut>(py: Python<'_>, slot: &Mutex<Option<S>>, step: F) -> GlueResult<Option<T>>
where
    S: Send + 'static,
    T: Send + 'static,
    F: FnOnce(S) -> Fut,
    Fut: Future<Output = (S, Result<T, Error>)> + Send + 'static,
{
    let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
    let Some(state) = guard.take() else {
        return Ok(None);
    };
    let (state, result) = wait(py, step(state))?;
    *guard = Some(state);
    Ok(Some(result?))
}
