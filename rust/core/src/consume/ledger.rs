//! Writers' positions delivered with no row to a consumer that acknowledges
//! cumulatively (ack policy `all`, or one the binding was not told): when an ack of
//! them cannot acknowledge a row the application still holds.

use std::sync::{Mutex, MutexGuard};

use async_nats::Subject;

/// What one binding of a consumer that may acknowledge cumulatively (ack policy
/// `all`, or one it was not told) handed out and acknowledged, so that writers'
/// positions delivered with no row are acknowledged on their own only where that
/// cannot acknowledge a row the application still holds.
///
/// An AckAll acknowledges every pending message up to its *stream* sequence (the
/// server's `UpdateAcks`), whoever it was delivered to. So positions alone are
/// acknowledged at once only while this binding has seen every delivery of the
/// consumer (consumer sequences from 1, in order, none lost or taken by another
/// reader) and every message it handed out is acknowledged. Otherwise they are held:
/// sent by the acknowledgement that makes that so; covered, as any message is, by an
/// ack of a later row; or, failing both, delivered again by the server after
/// `ack_wait` (and held again). A position never counts as a row handed out, so a
/// `messages()` loop waits past it as before.
#[derive(Debug)]
pub struct AckLedger {
    state: Mutex<LedgerState>,
}

#[derive(Debug)]
struct LedgerState {
    /// Every delivery of the consumer up to this consumer sequence came to this
    /// binding, in order; None once one did not.
    seen_through: Option<u64>,
    /// The highest stream sequence handed out (or delivered in a batch that failed
    /// to build: not acknowledged, to come again).
    handed: u64,
    /// The highest stream sequence acknowledged.
    acked: u64,
    /// Positions held back: (reply subject, stream sequence).
    held: Vec<(Subject, u64)>,
}

impl Default for AckLedger {
    fn default() -> Self {
        Self {
            state: Mutex::new(LedgerState {
                seen_through: Some(0),
                handed: 0,
                acked: 0,
                held: Vec::new(),
            }),
        }
    }
}

impl AckLedger {
    fn lock(&self) -> MutexGuard<'_, LedgerState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Deliveries arrived, in delivery order.
    pub(crate) fn seen(&self, consumer_seqs: impl Iterator<Item = u64>) {
        let mut s = self.lock();
        for seq in consumer_seqs {
            s.seen_through = match s.seen_through {
                Some(through) if seq == through + 1 => Some(seq),
                _ => None,
            };
        }
    }

    /// Messages up to `stream_seq` were handed out (or failed), not acknowledged.
    pub(crate) fn handed(&self, stream_seq: u64) {
        let mut s = self.lock();
        s.handed = s.handed.max(stream_seq);
    }

    /// Positions delivered with nothing else: the reply subjects to acknowledge now.
    pub(crate) fn positions_alone(
        &self,
        positions: impl Iterator<Item = (Subject, u64)>,
        ack_all: bool,
    ) -> Vec<Subject> {
        let mut s = self.lock();
        s.held.extend(positions);
        Self::release(&mut s, ack_all)
    }

    /// An ack of messages up to `stream_seq` was sent: the held positions to
    /// acknowledge now.
    pub(crate) fn acked(&self, stream_seq: u64, ack_all: bool) -> Vec<Subject> {
        let mut s = self.lock();
        s.acked = s.acked.max(stream_seq);
        Self::release(&mut s, ack_all)
    }

    fn release(s: &mut LedgerState, ack_all: bool) -> Vec<Subject> {
        if s.held.is_empty() {
            return Vec::new();
        }
        let safe = s.seen_through.is_some() && s.acked >= s.handed;
        let acked = s.acked;
        // Held positions at or below what was acknowledged are covered (with `all`)
        // or harmless to acknowledge (an unknown policy may be `explicit`).
        let (now, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut s.held)
            .into_iter()
            .partition(|(_, seq)| safe || *seq <= acked);
        s.held = keep;
        if ack_all {
            // One ack, of the highest, covers the others, and the server delivers
            // again whatever the highest held one leaves pending.
            if let Some(top) = s.held.iter().map(|(_, seq)| *seq).max() {
                s.held.retain(|(_, seq)| *seq == top);
                s.held.truncate(1);
            }
            let top = now
                .into_iter()
                .filter(|(_, seq)| *seq > acked)
                .max_by_key(|(_, seq)| *seq);
            if let Some((_, seq)) = &top {
                s.acked = *seq;
            }
            return top.map(|(reply, _)| reply).into_iter().collect();
        }
        if safe {
            let top = now.iter().map(|(_, seq)| *seq).max().unwrap_or(0);
            s.acked = s.acked.max(top);
        }
        now.into_iter().map(|(reply, _)| reply).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subjects(replies: Vec<Subject>) -> Vec<String> {
        replies.into_iter().map(|s| s.to_string()).collect()
    }

    fn position(seq: u64) -> (Subject, u64) {
        (Subject::from(format!("pos.{seq}")), seq)
    }

    #[test]
    fn ack_all_positions_alone_wait_for_every_row_handed_out_to_be_acked() {
        let ledger = AckLedger::default();
        // Rows 1..=3 handed out, not acknowledged; then a position alone: an AckAll
        // of it would acknowledge the rows, so it is held.
        ledger.seen([1, 2, 3].into_iter());
        ledger.handed(3);
        ledger.seen([4].into_iter());
        assert!(ledger
            .positions_alone([position(4)].into_iter(), true)
            .is_empty());
        // The rows' ack lets it go.
        assert_eq!(subjects(ledger.acked(3, true)), ["pos.4"]);
        // Now nothing is outstanding: the next position alone is acknowledged at once.
        ledger.seen([5].into_iter());
        assert_eq!(
            subjects(ledger.positions_alone([position(5)].into_iter(), true)),
            ["pos.5"]
        );
        // Held ones below a later row's ack are covered by it, not sent again.
        ledger.seen([6, 7].into_iter());
        ledger.handed(6);
        assert!(ledger
            .positions_alone([position(7)].into_iter(), true)
            .is_empty());
        ledger.seen([8].into_iter());
        ledger.handed(8);
        assert!(ledger.acked(8, true).is_empty());
        assert!(ledger.lock().held.is_empty());
    }

    #[test]
    fn a_binding_that_missed_a_delivery_never_acks_positions_alone() {
        // The consumer delivered 1..=3 elsewhere (another reader, or lost): this
        // binding cannot know they were acknowledged.
        let ledger = AckLedger::default();
        ledger.seen([4].into_iter());
        assert!(ledger
            .positions_alone([position(4)].into_iter(), true)
            .is_empty());
        ledger.seen([5].into_iter());
        ledger.handed(5);
        // Its own later row's ack covers the position (AckAll by stream sequence).
        assert!(ledger.acked(5, true).is_empty());
        assert!(ledger.lock().held.is_empty());
        // An unknown policy (maybe explicit) acknowledges what it holds once an ack
        // passed it: harmless either way.
        let unknown = AckLedger::default();
        unknown.seen([2].into_iter());
        assert!(unknown
            .positions_alone([position(2), position(3)].into_iter(), false)
            .is_empty());
        unknown.handed(4);
        assert_eq!(subjects(unknown.acked(4, false)), ["pos.2", "pos.3"]);
    }
}
