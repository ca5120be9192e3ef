//! `jetstream_arrow._core`: the Python face of jetstream-arrow-core. Thin by
//! design: classes, the runtime, GIL release, and errors to exceptions.

mod aio;
mod client;
mod codec;
mod consumer;
mod errors;
mod exports;
mod logging;
mod options;
mod push;
mod reader;
mod runtime;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    logging::forward_events(m)?;
    exports::register(m)?;
    m.add_class::<client::Client>()?;
    m.add_class::<client::Publisher>()?;
    m.add_class::<client::PublishOutcome>()?;
    m.add_class::<consumer::PullConsumer>()?;
    m.add_class::<consumer::ConsumedBatch>()?;
    m.add_class::<consumer::MessageStream>()?;
    m.add_class::<reader::ReadBatches>()?;
    m.add_class::<push::PushConsumer>()?;
    m.add_class::<aio::Call>()?;
    m.add_class::<aio::StopSignal>()?;
    Ok(())
}
