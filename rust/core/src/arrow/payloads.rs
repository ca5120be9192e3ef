//! The `data` column of message batches: payloads copied into `binary`, or viewed.
//!
//! Payloads are either copied into one `binary` column or, with
//! `SchemaOptions::payload_views`, kept where they arrived: a `binary_view` column
//! whose data buffers are the messages' own `Bytes`, so a large payload is never
//! copied; the received buffers stay alive as long as the batch does. A buffer per
//! message costs more than copying a short payload (measured: more CPU per message
//! than the copy at 1 KiB), so payloads under [`VIEW_FROM`] bytes are copied into the
//! batch's one shared block, and those of at most 12 bytes live in their view, as the
//! format does. A viewed payload keeps alive the whole buffer async-nats read it into
//! (payloads are split off the connection's read buffer), so a batch kept after the
//! read can hold more memory than its payloads. A decoded read always holds its
//! payloads this way: the decoder reads them once and the `data` column is not part
//! of its output.

use std::sync::Arc;

use arrow_array::builder::{make_view, BinaryBuilder};
use arrow_array::{ArrayRef, BinaryViewArray};
use arrow_buffer::{Buffer, ScalarBuffer};

/// The `data` column being built: payloads copied, or held as they arrived until the
/// batch is finished and then viewed.
pub(crate) enum Payloads {
    Copied(BinaryBuilder),
    Held(Vec<bytes::Bytes>),
}

/// Payloads from this length on are viewed where they arrived, not copied.
pub const VIEW_FROM: usize = 2048;
/// Payloads up to this length live inside their view (the Arrow format's limit).
const INLINE: usize = 12;

impl Payloads {
    pub(crate) fn new(views: bool) -> Self {
        if views {
            Self::Held(Vec::new())
        } else {
            Self::Copied(BinaryBuilder::new())
        }
    }

    /// Whether payloads are viewed (`binary_view`), not copied.
    pub(crate) fn views(&self) -> bool {
        matches!(self, Self::Held(_))
    }

    pub(crate) fn append(&mut self, payload: &bytes::Bytes) {
        match self {
            Self::Copied(b) => b.append_value(payload),
            Self::Held(held) => held.push(payload.clone()),
        }
    }

    pub(crate) fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Copied(b) => Arc::new(b.finish()),
            Self::Held(held) => Arc::new(view_payloads(std::mem::take(held))),
        }
    }
}

/// One `binary_view` array of `held`: payloads of at most [`INLINE`] bytes inside
/// their view, shorter than [`VIEW_FROM`] copied into one buffer of exactly their
/// size (block 0), longer ones each their own block, the `Bytes` they arrived in.
/// Built in one go, not through `BinaryViewBuilder`, whose blocks for copied values
/// start over (and reserve up to 2 MiB) after every block it is handed.
fn view_payloads(held: Vec<bytes::Bytes>) -> BinaryViewArray {
    let copied_len: usize = held
        .iter()
        .map(bytes::Bytes::len)
        .filter(|&n| n > INLINE && n < VIEW_FROM)
        .sum();
    let mut copied = Vec::with_capacity(copied_len);
    let mut blocks: Vec<Buffer> = Vec::new();
    let first_own_block = u32::from(copied_len > 0);
    let mut views = Vec::with_capacity(held.len());
    for payload in held {
        let len = payload.len();
        let view = if len <= INLINE {
            make_view(&payload, 0, 0)
        } else if len < VIEW_FROM {
            let offset =
                u32::try_from(copied.len()).expect("a batch's short payloads fit in 4 GiB");
            copied.extend_from_slice(&payload);
            make_view(&payload, 0, offset)
        } else {
            let block = first_own_block
                + u32::try_from(blocks.len()).expect("fewer than 2^32 payloads in a batch");
            let view = make_view(&payload, block, 0);
            blocks.push(Buffer::from(payload));
            view
        };
        views.push(view);
    }
    if copied_len > 0 {
        blocks.insert(0, Buffer::from_vec(copied));
    }
    // SAFETY: each view was made by `make_view` over the very bytes it points at: its
    // prefix and length from them, and its block and offset where they were placed
    // (block 0 the copied payloads, then one block per viewed payload, in order).
    unsafe { BinaryViewArray::new_unchecked(ScalarBuffer::from(views), blocks, None) }
}
