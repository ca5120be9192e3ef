//! jetstream-arrow core: NATS JetStream in and out of Apache Arrow.
//!
//! Pure Rust, no Python: the `jetstream-arrow-python` crate wraps it. Modules by
//! concept: [`defaults`] (every default), [`connection`] (connect options),
//! [`server_urls`] (credentials in server URLs, and redacting them), [`api`]
//! (the JetStream vocabulary and API requests), [`schema`] (the one message schema),
//! [`publish_input`] and [`publish`] (rows to messages through the ack window),
//! [`pull`] (the pull loop), [`push`] (push consumers and flow-control acking),
//! [`ordered`] (the self-healing ordered consumer), [`stored`] (one message as the
//! stream's leader has it), [`read`] (range reads and open-ended ordered streams),
//! [`consumer`] (durable pull consumers and acks), [`batch_builder`] and [`metadata`]
//! (messages to Arrow columns). See docs/ARCHITECTURE.md.

pub mod api;
pub mod batch_builder;
pub mod connection;
pub mod consumer;
pub mod defaults;
pub mod direct;
pub mod error;
pub mod flow_control;
pub mod metadata;
pub mod ordered;
pub mod publish;
pub mod publish_input;
pub mod pull;
pub mod push;
pub mod read;
pub mod resync;
pub mod schema;
pub mod server_urls;
pub mod stored;

pub use connection::{ConnectConfig, Connection};
pub use error::{Error, ErrorKind, Result};
