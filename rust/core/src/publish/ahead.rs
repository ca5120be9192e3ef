//! A batch's payloads compressed ahead of the rows being sent, for a publish with
//! `compression`: on threads of their own (as many as the machine has cores, at most
//! [`MAX_THREADS`]), chunk by chunk, the chunks dealt round in turn, while the sending
//! task sends what is ready, so compressing and sending overlap instead of taking
//! turns. Each thread keeps at most [`AHEAD_CHUNKS`] chunks waiting compressed; a small
//! batch is compressed on the spot.

use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Mutex;

use bytes::Bytes;

use crate::compression::Compression;
use crate::error::{Error, Result};

/// A batch of fewer payload bytes is compressed at once, on the sending task: a
/// thread costs more than it saves there.
pub const AHEAD_FROM_BYTES: usize = 256 << 10;
/// The payload bytes of one chunk the thread compresses and hands over.
const CHUNK_BYTES: usize = 1 << 20;
/// Chunks a thread has compressed and the sending task has not reached, at most.
const AHEAD_CHUNKS: usize = 2;
/// Compressing threads of one batch, at most.
const MAX_THREADS: usize = 4;

/// One row's payload compressed: None when it is sent plain (empty, or it would not
/// shrink).
type Packed = Option<Bytes>;

/// Each row's payload compressed, or being compressed ahead.
pub struct CompressedAhead {
    state: Mutex<State>,
}

struct State {
    /// Rows compressed so far, from the first.
    rows: Vec<Packed>,
    /// The chunks still to come: chunk `i` from thread `i % threads`.
    ahead: Vec<Receiver<Result<Vec<Packed>>>>,
    /// Chunks received so far.
    chunks: usize,
}

/// `payload` compressed, or None to send it plain.
fn pack(compression: Compression, payload: &Bytes) -> Result<Packed> {
    if payload.is_empty() {
        return Ok(None);
    }
    let packed = compression.compress(payload)?;
    Ok((packed.len() < payload.len()).then(|| Bytes::from(packed)))
}

impl CompressedAhead {
    /// Starts compressing `payloads` (the batch's, in row order): at once when they
    /// are few bytes, else on a thread.
    pub fn start(compression: Compression, payloads: Vec<Bytes>) -> Result<Self> {
        let bytes: usize = payloads.iter().map(Bytes::len).sum();
        if bytes < AHEAD_FROM_BYTES {
            let rows = payloads
                .iter()
                .map(|p| pack(compression, p))
                .collect::<Result<_>>()?;
            return Ok(Self {
                state: Mutex::new(State {
                    rows,
                    ahead: Vec::new(),
                    chunks: 0,
                }),
            });
        }
        // The rows of each chunk, in order.
        let mut bounds = Vec::new();
        let (mut first, mut size) = (0, 0);
        for (row, p) in payloads.iter().enumerate() {
            size += p.len();
            if size >= CHUNK_BYTES {
                bounds.push(first..row + 1);
                (first, size) = (row + 1, 0);
            }
        }
        if first < payloads.len() {
            bounds.push(first..payloads.len());
        }
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, MAX_THREADS)
            .min(bounds.len());
        let payloads = std::sync::Arc::new(payloads);
        let mut ahead = Vec::with_capacity(threads);
        for t in 0..threads {
            let (sender, receiver) = sync_channel(AHEAD_CHUNKS);
            let mine: Vec<_> = bounds.iter().skip(t).step_by(threads).cloned().collect();
            let payloads = payloads.clone();
            std::thread::Builder::new()
                .name("jsa-compress".into())
                .spawn(move || {
                    for rows in mine {
                        let packed = payloads[rows]
                            .iter()
                            .map(|p| pack(compression, p))
                            .collect();
                        // The batch was dropped (the publish ended): stop.
                        if sender.send(packed).is_err() {
                            return;
                        }
                    }
                })
                .map_err(|e| Error::bad_input(format!("starting a compressing thread: {e}")))?;
            ahead.push(receiver);
        }
        Ok(Self {
            state: Mutex::new(State {
                rows: Vec::new(),
                ahead,
                chunks: 0,
            }),
        })
    }

    /// Row `row`'s payload compressed, waiting for its chunk if it is not ready (a
    /// wait of at most one chunk's compression once the thread is ahead).
    pub fn row(&self, row: usize) -> Result<Packed> {
        let mut state = self.state.lock().expect("compressed rows lock");
        while state.rows.len() <= row {
            if state.ahead.is_empty() {
                return Err(Error::bad_input(format!(
                    "row {row}: past the rows compressed"
                )));
            }
            let from = state.chunks % state.ahead.len();
            let chunk = state.ahead[from].recv().map_err(|_| {
                Error::bad_input(format!("row {row}: its payload was never compressed"))
            })??;
            state.chunks += 1;
            state.rows.extend(chunk);
        }
        Ok(state.rows[row].clone())
    }
}
