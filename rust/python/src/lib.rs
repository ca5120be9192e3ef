//! `jetstream_arrow._core`: the Python face of jetstream-arrow-core. Thin by
//! design: classes, the runtime, GIL release, and errors to exceptions.

mod aio;
mod client;
mod codec;
mod consumer;
mod errors;
mod exports;
mod options;
mod push;
mod reader;
mod runtime;

use pyo3::prelude::*;

/// The core's events (`jetstream_arrow_core::events`) go to Python's `logging`, each to
/// the logger its target names (`jetstream_arrow.connection`, ...). Loggers are looked
/// up once, levels every time (the events are rare), so a logging configuration made
/// after import applies. async-nats's own events reach the `async_nats` logger from
/// warnings up.
fn forward_events_to_logging(py: Python<'_>) -> PyResult<()> {
    let logger = pyo3_log::Logger::new(py, pyo3_log::Caching::Loggers)?
        .filter(log::LevelFilter::Info)
        .filter_target("async_nats".to_owned(), log::LevelFilter::Warn);
    // Another extension in the process may have installed its logger first: then the
    // events go where that one sends them.
    let _ = logger.install();
    Ok(())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    forward_events_to_logging(m.py())?;
    exports::register(m)?;
    m.add_class::<client::Client>()?;
    m.add_class::<client::Publisher>()?;
    m.add_class::<client::PublishOutcome>()?;
    m.add_class::<consumer::PullConsumer>()?;
    m.add_class::<consumer::ConsumedBatch>()?;
    m.add_class::<consumer::MessageStream>()?;
    m.add_class::<reader::ReadBatches>()?;
    m.add_class::<push::PushConsumer>()?;
    m.add_class::<aio::StopSignal>()?;
    Ok(())
}
