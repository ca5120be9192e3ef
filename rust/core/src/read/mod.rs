//! Replaying a range of a stream in sequence order as Arrow batches.
//!
//! Mechanism: an ordered consumer ([`crate::read::ordered`]): an ephemeral AckNone pull
//! consumer, recreated where it stopped when a server restarts, a leader changes or
//! deliveries are lost, so the range comes out exactly once and in order. It is
//! deleted when the read ends or is closed, and has an inactivity threshold in case
//! the process dies, so a read leaves no state on the server.
//!
//! Or, with [`ReadMethod::Direct`], batched direct gets ([`crate::read::direct`]): no
//! consumer at all, on streams with `allow_direct`. [`ReadMethod::Auto`] (the
//! default) takes direct gets for short ranges, where a consumer's create and delete
//! round trips cost more than the read, when they are sure to see every message.
//!
//! Either way the read owes the sequences its stream held in the range when it opened
//! ([`crate::read::completeness`]): a source that says nothing is pending before the
//! range's end is opened again after the last message read, and a read of every
//! subject counts what it got at its end. (Failures while reading are each source's
//! own to recover: both retry for `resume_timeout`.)
//!
//! [`OrderedStream`] is the open-ended form: it follows the stream as it grows.
//!
//! The rooms: `options.rs` (what a read takes, checked), `range.rs` (a range read: its
//! choice of method and the batching of either source's messages), `follow.rs` (the
//! open-ended stream), `value_schema.rs` (a codec's schema inferred from a sample), and
//! the sources and checks they use: `ordered.rs`, `direct.rs`, `last.rs`,
//! `completeness.rs`, `msg_get.rs`.

pub mod completeness;
pub mod direct;
pub mod follow;
pub mod last;
pub mod msg_get;
pub mod options;
pub mod ordered;
pub mod range;
pub mod value_schema;

pub use follow::{FollowOptions, OrderedStream};
pub(crate) use options::refuse_unmatched_filters;
pub use options::{ReadMethod, ReadOptions};
pub use range::StreamReader;
pub use value_schema::resolve_value_schema;
