//! The core's events, forwarded to Python's `logging` until the interpreter exits.
//!
//! Events come from the runtime's threads (a connection closing, a reconnect), at any
//! time, also while Python shuts down. A thread that takes the GIL once the interpreter
//! is finalizing is ended by CPython (`pthread_exit`), which unwinds through Rust
//! frames and crashes the process. So an exit hook, registered when the module is
//! imported and therefore run after the package's own exit hooks (the Spark
//! connection cache closes its connections in one), shuts the gate and waits, GIL
//! released, for the events already in flight; events after it (from connections
//! still open) are dropped, which is all that can be done with them. A forked child
//! starts with nothing in flight: the threads whose events were are not in it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use log::{LevelFilter, Log, Metadata, Record};
use pyo3::prelude::*;

/// Shut by the exit hook; read before every forwarded event.
static SHUT: AtomicBool = AtomicBool::new(false);
/// Events being handed to Python now (each holds or waits for the GIL).
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// How long the exit hook waits for events in flight: each is one logging call.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

struct Gated(pyo3_log::Logger);

impl Log for Gated {
    fn enabled(&self, metadata: &Metadata) -> bool {
        !SHUT.load(Ordering::SeqCst) && self.0.enabled(metadata)
    }

    fn log(&self, record: &Record) {
        // Counted before the gate is read, so the hook either sees this event in
        // flight or this event sees the gate shut.
        IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        if !SHUT.load(Ordering::SeqCst) {
            self.0.log(record);
        }
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }

    fn flush(&self) {}
}

/// Send the core's events (`jetstream_arrow_core::events`) to Python's `logging`, each
/// to the logger its target names (`jetstream_arrow.connection`, ...). Loggers are
/// looked up once, levels every time (the events are rare), so a logging configuration
/// made after import applies. async-nats's own events reach the `async_nats` logger
/// from warnings up.
pub fn forward_events(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    let logger = pyo3_log::Logger::new(py, pyo3_log::Caching::Loggers)?
        .filter(LevelFilter::Info)
        .filter_target("async_nats".to_owned(), LevelFilter::Warn);
    // Another extension in the process may have installed its logger first: then the
    // events go where that one sends them.
    if log::set_boxed_logger(Box::new(Gated(logger))).is_ok() {
        log::set_max_level(LevelFilter::Info);
    }
    let hook = wrap_pyfunction!(stop_forwarding_at_exit, module)?;
    py.import("atexit")?.call_method1("register", (hook,))?;
    let forked = wrap_pyfunction!(nothing_in_flight_after_fork, module)?;
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("after_in_child", forked)?;
    py.import("os")?
        .call_method("register_at_fork", (), Some(&kwargs))?;
    Ok(())
}

/// In a forked child: the events counted in flight were the parent's threads', which
/// the child does not have; its exit hook must not wait for them.
#[pyfunction]
fn nothing_in_flight_after_fork() {
    IN_FLIGHT.store(0, Ordering::SeqCst);
}

/// Shut the gate and wait for the events in flight (they need the GIL, so it is
/// released meanwhile).
#[pyfunction]
fn stop_forwarding_at_exit(py: Python<'_>) {
    SHUT.store(true, Ordering::SeqCst);
    py.detach(|| {
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        while IN_FLIGHT.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}
