//! `PushConsumer`: durable push consumers, flow-control acking included; its
//! `messages()` is the same `MessageStream` of `ConsumedBatch`es as pull consumers'.

use jetstream_arrow_core::connection::Connection;
use jetstream_arrow_core::consume::durable::AckPolicy;
use jetstream_arrow_core::consume::push::{PushConsumer as CoreConsumer, PushOptions};
use pyo3::prelude::*;

use std::future::Future;

use jetstream_arrow_core::Error;

use crate::aio::Call;
use crate::codec::{codec_spec, resolve_consumer_codec};
use crate::consumer::{Deliveries, MessageStream};
use crate::errors::GlueResult;
use crate::options::read_declared;

#[pyclass(module = "jetstream_arrow._core", frozen)]
pub struct PushConsumer {
    inner: CoreConsumer,
}

impl PushConsumer {
    /// The binding, to run on the runtime (the consumer's info is looked up unless
    /// `deliver_to` is given).
    pub fn bind(
        conn: Connection,
        stream: &str,
        name: &str,
        deliver_to: Option<(String, Option<String>)>,
        ack_policy: Option<&str>,
    ) -> GlueResult<impl Future<Output = Result<Self, Error>> + Send + 'static> {
        let policy = ack_policy.map(AckPolicy::parse).transpose()?;
        let (stream, name) = (stream.to_string(), name.to_string());
        Ok(async move {
            let inner = CoreConsumer::bind(conn, &stream, &name, deliver_to, policy).await?;
            Ok(Self { inner })
        })
    }
}

#[pymethods]
impl PushConsumer {
    #[getter]
    fn stream(&self) -> String {
        self.inner.stream.clone()
    }

    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }

    #[getter]
    fn deliver_subject(&self) -> String {
        self.inner.deliver_subject.clone()
    }

    /// Continuous consumption from the deliver subject as `options` (a
    /// `jetstream_arrow.PushOptions`) say, payloads decoded by `codec`.
    #[pyo3(signature = (options, codec=None))]
    fn messages(
        &self,
        options: &Bound<'_, PyAny>,
        codec: Option<&Bound<'_, PyAny>>,
    ) -> GlueResult<Call> {
        let mut options: PushOptions = read_declared(options, "push")?;
        let values = codec_spec(codec)?;
        let consumer = self.inner.clone();
        Ok(Call::new(async move {
            options.values =
                resolve_consumer_codec(consumer.connection(), &consumer.stream, values).await?;
            let stream = consumer.messages(options).await?;
            Ok::<_, Error>(MessageStream::new(Deliveries::Push(Box::new(stream))))
        }))
    }
}
