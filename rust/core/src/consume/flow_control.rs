//! Flow-control acking for push consumers. The server asks `100 FlowControl Request`
//! (reply subject under `$JS.FC.`) when its window fills, and repeats the subject in
//! the `Nats-Consumer-Stalled` header of idle heartbeats while it waits. The answer,
//! sent to the latest such subject with headers `Nats-Last-Consumer` and
//! `Nats-Last-Stream`, acknowledges every message up to that stream sequence (AckAll) and reopens
//! the window. We answer once the application has *released* (`batch.ack()`) half of
//! what was delivered before the request and not yet answered for, and we name the
//! last released message: nothing handed out but unreleased is ever acked, a slow
//! application keeps the window closed instead of buffering without bound, and a
//! window costs about two ack messages. Answering at half (not at all) keeps the
//! server sending while the application works through the rest of the window, as
//! double buffering does: waiting for the whole window stopped the flow once per
//! window, for a round trip and the application's last batch. Other
//! ack policies get an empty answer (it reopens the window, acks nothing) as soon as
//! the request is reached, as every NATS client does.
//!
//! Sequences are counted per *epoch*: a reset of the consumer (see `crate::consume::push`)
//! restarts its delivery sequence at 1, so releases of batches handed out before the
//! reset name sequences the server no longer knows and are ignored (those messages
//! are delivered again).

use std::sync::Mutex;

use async_nats::{HeaderMap, Subject};

use crate::connection::Connection;
use crate::error::Result;

use crate::api::headers::{LAST_CONSUMER, LAST_STREAM};

/// Where a flow-controlled consumer stands: what was delivered, what the application
/// released, and the flow-control request waiting for an answer.
#[derive(Debug, Default)]
struct FlowState {
    /// (consumer seq, stream seq) of the last message received.
    delivered: (u64, u64),
    /// (consumer seq, stream seq) of the last message the application released.
    released: (u64, u64),
    /// The latest flow-control subject and the consumer seq it covers.
    waiting: Option<(Subject, u64)>,
    /// Flow-control answers sent, for the curious (benches, tests).
    answers: u64,
    /// The consumer seq named by the last answer of this epoch.
    answered: u64,
    /// Bumped by every reset of the consumer's delivery sequence.
    epoch: u64,
    /// The consumer seq of the last batch with rows handed out (or failed).
    handed: u64,
    /// (consumer seq, stream seq) of the last writers' position delivered with no
    /// row and not released yet ([`FlowControl::release_positions`]).
    held: (u64, u64),
}

/// Flow-control requests and their answers, shared by a stream and its batches.
#[derive(Debug)]
pub struct FlowControl {
    conn: Connection,
    /// Answers acknowledge what was released (`ack_policy: flow_control`).
    pub(crate) acks: bool,
    state: Mutex<FlowState>,
}

impl FlowControl {
    pub(crate) fn new(conn: Connection, acks: bool) -> Self {
        Self {
            conn,
            acks,
            state: Mutex::new(FlowState::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FlowState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The number of flow-control answers sent so far.
    pub fn answers(&self) -> u64 {
        self.lock().answers
    }

    /// A delivery arrived; returns the epoch it belongs to.
    pub(crate) fn delivered(&self, consumer_seq: u64, stream_seq: u64) -> u64 {
        let mut state = self.lock();
        state.delivered = (consumer_seq, stream_seq);
        state.epoch
    }

    /// The server asks on `subject`: it covers everything delivered so far.
    pub(crate) async fn requested(&self, subject: Subject) -> Result<()> {
        {
            let mut state = self.lock();
            let covers = state.delivered.0;
            state.waiting = Some((subject, covers));
        }
        self.answer_if_due().await
    }

    /// A flow-control request waits for releases (`ack_policy: flow_control`): the
    /// server may send nothing more until the application releases what it holds.
    pub(crate) fn awaits_release(&self) -> bool {
        self.acks && self.lock().waiting.is_some()
    }

    /// The current epoch: deliveries of an older one are stale.
    pub(crate) fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// The consumer's delivery sequence was reset: start a new epoch in which nothing
    /// is delivered or released, and give a waiting request an empty answer (the
    /// server keeps its request across a reset; the answer reopens the window and
    /// acknowledges nothing).
    pub(crate) async fn reset(&self) -> Result<()> {
        {
            let mut state = self.lock();
            state.epoch += 1;
            state.delivered = (0, 0);
            state.released = (0, 0);
            state.answered = 0;
            state.handed = 0;
            state.held = (0, 0);
            if let Some((_, covers)) = &mut state.waiting {
                *covers = 0;
            }
        }
        self.answer_if_due().await
    }

    /// The application is done with everything up to this message, delivered in
    /// `epoch`.
    pub async fn release(&self, epoch: u64, consumer_seq: u64, stream_seq: u64) -> Result<()> {
        {
            let mut state = self.lock();
            if epoch == state.epoch && consumer_seq > state.released.0 {
                state.released = (consumer_seq, stream_seq);
            }
            // Positions held back behind this release go with it once nothing
            // handed out before them is unreleased.
            if state.released.0 >= state.handed && state.held.0 > state.released.0 {
                state.released = state.held;
            }
        }
        self.answer_if_due().await
    }

    /// A batch with rows (or one that failed) was handed out up to this consumer
    /// sequence, in `epoch`.
    pub(crate) fn handed_out_rows(&self, epoch: u64, consumer_seq: u64) {
        let mut state = self.lock();
        if epoch == state.epoch {
            state.handed = state.handed.max(consumer_seq);
        }
    }

    /// Writers' positions delivered with no row, up to this message, in `epoch`,
    /// which are never handed out. An answer naming them acknowledges every message
    /// before them, so they are released now only when every batch handed out
    /// before is released; else they are held and go with the release that makes
    /// it so (a flow-control consumer has no ack wait to deliver them again, and
    /// positions never released could keep a window from ever being answered).
    pub(crate) async fn release_positions(
        &self,
        epoch: u64,
        consumer_seq: u64,
        stream_seq: u64,
    ) -> Result<()> {
        {
            let mut state = self.lock();
            if epoch != state.epoch {
                return Ok(());
            }
            if state.released.0 >= state.handed {
                if consumer_seq > state.released.0 {
                    state.released = (consumer_seq, stream_seq);
                }
            } else if consumer_seq > state.held.0 {
                state.held = (consumer_seq, stream_seq);
            }
        }
        self.answer_if_due().await
    }

    /// Without flow-control acks: the application has been handed everything up to
    /// this consumer sequence.
    pub(crate) async fn handed_out(&self, consumer_seq: u64) -> Result<()> {
        {
            let mut state = self.lock();
            if consumer_seq > state.released.0 {
                state.released.0 = consumer_seq;
            }
        }
        self.answer_if_due().await
    }

    /// Answer the waiting request once half of what it covers beyond the last answer
    /// is released (without flow-control acks: handed out).
    pub(crate) async fn answer_if_due(&self) -> Result<()> {
        let answer = {
            let mut state = self.lock();
            let due = match &state.waiting {
                Some((_, covers)) => {
                    let outstanding = covers.saturating_sub(state.answered);
                    state.released.0 >= state.answered + outstanding.div_ceil(2)
                }
                None => false,
            };
            if due {
                let (subject, _) = state.waiting.take().expect("checked");
                state.answers += 1;
                state.answered = state.answered.max(state.released.0);
                Some((subject, state.released))
            } else {
                None
            }
        };
        let Some((subject, (consumer_seq, stream_seq))) = answer else {
            return Ok(());
        };
        if self.acks && consumer_seq > 0 {
            let mut headers = HeaderMap::new();
            headers.insert(LAST_CONSUMER, consumer_seq.to_string().as_str());
            headers.insert(LAST_STREAM, stream_seq.to_string().as_str());
            self.conn
                .client
                .publish_with_headers(subject, headers, bytes::Bytes::new())
                .await?;
        } else {
            self.conn
                .client
                .publish(subject, bytes::Bytes::new())
                .await?;
        }
        Ok(())
    }
}
