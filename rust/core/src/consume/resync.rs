//! Keeping a flow-control push consumer in step with the server: the consumer
//! sequence as this client saw it, the verdict on each delivery and heartbeat, and
//! the reset (`CONSUMER.RESET`) that brings it back in step. Used by [`crate::consume::push`].

use crate::api::subjects;
use crate::api::types::ConsumerReset;
use crate::connection::Connection;
use crate::consume::flow_control::FlowControl;
use crate::error::{err_codes, ErrorKind, Result};

/// Keeps a flow-control consumer in step with the server.
///
/// Such a consumer acknowledges cumulatively and has no ack timeout, so nothing the
/// server counts as delivered is ever sent again by itself. A delivery lost on the
/// way (a server killed mid-window, a reconnect, a subscription that overflowed) or a
/// server that restarts from an older delivery state would stall it for good: the
/// answers would name sequences the server does not expect, and the window would
/// never reopen. So every delivery and heartbeat is checked against the consumer
/// sequence (`Nats-Last-Consumer` on heartbeats), and on any mismatch the consumer is
/// reset to its ack floor (`CONSUMER.RESET`, as the server's own stream sourcing
/// does): everything not yet acknowledged is delivered again (at least once), from
/// consumer sequence 1.
pub(crate) struct Resync {
    pub(crate) conn: Connection,
    pub(crate) stream: String,
    pub(crate) name: String,
    pub(crate) sequence: Sequence,
}

/// The consumer sequence as this client has seen it since the last reset.
#[derive(Debug, Default)]
pub(crate) struct Sequence {
    /// The consumer sequence of the last delivery accepted since the last reset.
    last: u64,
    /// False from a reset until the server's new numbering is seen (a delivery with
    /// sequence 1, or a heartbeat naming 0): deliveries still in flight from before
    /// the reset are dropped meanwhile.
    restarting: bool,
    /// Heartbeats naming an old sequence while restarting. One may have been sent
    /// before the reset; a second means the new numbering's first deliveries were
    /// lost, and the consumer must be reset again.
    old_heartbeats: u32,
}

/// What to do with a delivery or a heartbeat.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Accept,
    /// Sent before the last reset; it comes again.
    Stale,
    /// Out of step with the server: reset.
    Gap,
}

impl Sequence {
    pub(crate) fn on_delivery(&mut self, consumer_seq: u64) -> Verdict {
        if self.restarting {
            if consumer_seq != 1 {
                return Verdict::Stale;
            }
            self.restarting = false;
        } else if consumer_seq != self.last + 1 {
            return Verdict::Gap;
        }
        self.last = consumer_seq;
        Verdict::Accept
    }

    /// `last_consumer`: the heartbeat's `Nats-Last-Consumer`, the server's last
    /// delivered consumer sequence.
    pub(crate) fn on_heartbeat(&mut self, last_consumer: u64) -> Verdict {
        if self.restarting {
            if last_consumer != 0 {
                self.old_heartbeats += 1;
                return if self.old_heartbeats < 2 {
                    Verdict::Stale
                } else {
                    Verdict::Gap
                };
            }
            self.restarting = false;
        }
        if last_consumer == self.last {
            Verdict::Accept
        } else {
            Verdict::Gap
        }
    }

    /// The server numbers deliveries afresh from 1.
    fn restart(&mut self) {
        *self = Self {
            restarting: true,
            ..Self::default()
        };
    }
}

impl Resync {
    /// A flow-control consumer starts from its ack floor, before anyone subscribes:
    /// what an earlier subscriber was handed but did not release is never sent again
    /// otherwise (there is no ack timeout). Returns the keeper of its sequence, or
    /// None for a consumer that may not be reset (its deliver policy forbids it, or
    /// this client may not use `CONSUMER.RESET`).
    pub(crate) async fn start(conn: &Connection, stream: &str, name: &str) -> Result<Option<Self>> {
        match reset_consumer(conn, stream, name).await {
            Ok(_) => {}
            Err(e)
                if e.kind() == ErrorKind::Authorization
                    || e.api_code().map(|c| c.err_code)
                        == Some(err_codes::CONSUMER_INVALID_RESET) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e),
        }
        Ok(Some(Self {
            conn: conn.clone(),
            stream: stream.to_string(),
            name: name.to_string(),
            // Reset before subscribing: the first delivery is sequence 1.
            sequence: Sequence::default(),
        }))
    }

    /// Reset the consumer to its ack floor and start a new flow-control epoch.
    pub(crate) async fn reset(&mut self, flow: &FlowControl, why: &str) -> Result<()> {
        crate::events::consumer_reset(&self.stream, &self.name, &why);
        flow.reset().await?;
        self.sequence.restart();
        reset_consumer(&self.conn, &self.stream, &self.name).await?;
        Ok(())
    }
}

/// `CONSUMER.RESET` to the ack floor; returns the next stream sequence to deliver.
pub(crate) async fn reset_consumer(conn: &Connection, stream: &str, name: &str) -> Result<u64> {
    let reply: ConsumerReset = conn
        .api_get(&subjects::consumer_reset(stream, name))
        .await
        .map_err(|e| e.context(format!("resetting consumer {name:?} to its ack floor")))?;
    Ok(reply.reset_seq)
}

#[cfg(test)]
mod tests {
    use super::{Sequence, Verdict};

    #[test]
    fn deliveries_in_sequence_are_accepted_and_a_jump_is_a_gap() {
        let mut seq = Sequence::default();
        assert_eq!(seq.on_delivery(1), Verdict::Accept);
        assert_eq!(seq.on_delivery(2), Verdict::Accept);
        assert_eq!(seq.on_heartbeat(2), Verdict::Accept);
        assert_eq!(seq.on_delivery(4), Verdict::Gap);
        // A server restarted from an older state numbers backwards.
        assert_eq!(seq.on_delivery(2), Verdict::Gap);
        // A heartbeat naming what was never received.
        assert_eq!(seq.on_heartbeat(5), Verdict::Gap);
    }

    #[test]
    fn after_a_reset_old_deliveries_are_stale_until_sequence_one() {
        let mut seq = Sequence::default();
        for n in 1..=10 {
            assert_eq!(seq.on_delivery(n), Verdict::Accept);
        }
        seq.restart();
        assert_eq!(seq.on_delivery(11), Verdict::Stale);
        assert_eq!(seq.on_delivery(12), Verdict::Stale);
        assert_eq!(seq.on_delivery(1), Verdict::Accept);
        assert_eq!(seq.on_delivery(2), Verdict::Accept);
        assert_eq!(seq.on_heartbeat(2), Verdict::Accept);
    }

    #[test]
    fn after_a_reset_with_nothing_to_deliver_a_heartbeat_naming_zero_syncs() {
        let mut seq = Sequence::default();
        assert_eq!(seq.on_delivery(1), Verdict::Accept);
        seq.restart();
        assert_eq!(seq.on_heartbeat(0), Verdict::Accept);
        assert_eq!(seq.on_delivery(1), Verdict::Accept);
    }

    #[test]
    fn a_lost_first_delivery_after_a_reset_asks_for_another_reset() {
        let mut seq = Sequence::default();
        seq.restart();
        // Sent before the reset took effect: tolerated once.
        assert_eq!(seq.on_heartbeat(7), Verdict::Stale);
        // Sequences 1 and 2 were lost: the server names 2 again.
        assert_eq!(seq.on_delivery(3), Verdict::Stale);
        assert_eq!(seq.on_heartbeat(3), Verdict::Gap);
    }
}
