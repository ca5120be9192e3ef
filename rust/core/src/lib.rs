//! jetstream-arrow core: NATS JetStream in and out of Apache Arrow.
//!
//! Pure Rust, no Python: the `jetstream-arrow-python` crate wraps it. Modules by
//! concept:
//! - [`defaults`] (every default), [`limits`] (the engine's fixed bounds) and
//!   [`options`] (every native option declared once: the options structs, their
//!   tables, and option values as callers give them, checked once);
//! - [`connection`] (connect options) and [`server_urls`] (credentials in server URLs,
//!   and redacting them);
//! - [`api`]: the JetStream vocabulary (subjects, headers, statuses) and API requests;
//! - [`retry`]: which failures are tried again, and the pauses between attempts;
//! - [`arrow`]: the one message schema and messages to Arrow columns;
//! - [`codec`]: payloads decoded into typed columns and encoded from them (JSON,
//!   Avro, Arrow IPC);
//! - [`publish`]: rows to messages through the ack window, or fast ingest;
//! - [`read`]: range reads and open-ended ordered streams, by ordered consumer or
//!   direct get, and one stored message;
//! - [`consume`]: the pull loop, durable pull consumers, push consumers and
//!   flow-control acking.
//!
//! See docs/ARCHITECTURE.md.

// First: its macro is used by the modules below it.
#[macro_use]
mod named_choices;

pub mod api;
pub mod arrow;
pub mod codec;
pub mod compression;
pub mod connection;
pub mod consume;
pub mod defaults;
pub mod error;
pub mod events;
pub mod limits;
pub mod options;
pub mod publish;
pub mod read;
pub mod retry;
pub mod server_urls;
mod tls;

pub use connection::{ConnectConfig, Connection};
pub use error::{Error, ErrorKind, Result};
