//! Whether a range read came out whole: what it owes and what it got.
//!
//! A read owes the sequences `start..=last` that the stream held when it opened
//! (`last` is the read's end, or the stream's last sequence then if that is lower).
//! Its source ends early when the server says nothing is pending before `last`: true
//! when the rest was deleted or does not match the read's subjects, so the reader
//! opens its source again after the last message read ([`Progress::resume_at`]) and
//! ends only when that one has nothing either. At its end, a read of every subject of
//! a stream that held every sequence of the range when it opened must have got each
//! one; fewer is an error unless the stream lost messages meanwhile (its limits, a
//! purge, a delete), never a silent loss.

use crate::api::types::StreamInfo;
use crate::error::{Error, ErrorKind};

/// What a stream holds, from its `STREAM.INFO` state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holding {
    pub first: u64,
    pub last: u64,
    pub messages: u64,
}

impl From<&StreamInfo> for Holding {
    fn from(info: &StreamInfo) -> Self {
        Self {
            first: info.state.first_sequence,
            last: info.state.last_sequence,
            messages: info.state.messages,
        }
    }
}

impl Holding {
    /// Whether the stream stores every sequence of `start..=last`: its head has not
    /// passed `start`, and no message between its first and last is deleted (the
    /// state counts deletions for the whole stream, not per range).
    pub fn holds_every_sequence(&self, start: u64, last: u64) -> bool {
        self.messages > 0
            && self.first <= start
            && start <= last
            && last <= self.last
            && self.last - self.first + 1 == self.messages
    }
}

/// The error for a read of every subject of `stream` that got `received` of the
/// sequences `start..=last`, given what the stream holds when the read ended; None
/// when it got them all, or when the stream no longer holds them all (messages were
/// removed while it read, which the caller's own policy judges).
pub fn incomplete(
    stream: &str,
    start: u64,
    last: u64,
    received: u64,
    now: Holding,
) -> Option<Error> {
    let expected = last - start + 1;
    if received == expected || !now.holds_every_sequence(start, last) {
        return None;
    }
    Some(Error::new(
        ErrorKind::Api,
        format!(
            "the read of stream {stream:?} sequences {start}..{last} returned {received} \
             messages where the stream holds {expected}; the read is incomplete"
        ),
    ))
}

/// The range a read owes and how far it got.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The first sequence owed; None for a read that starts at a time.
    pub start: Option<u64>,
    /// The last sequence owed: the read's end, or the stream's last sequence when it
    /// opened if that is lower.
    pub last: u64,
    /// The sequence after the last one read; None before the first.
    pub next: Option<u64>,
    /// Messages read of `start..=last`.
    pub received: u64,
    /// Whether the count is checked at the end ([`incomplete`]).
    pub count_checked: bool,
}

impl Progress {
    pub fn delivered(&mut self, seq: u64) {
        self.next = Some(seq + 1);
        if self.start.is_none_or(|start| start <= seq) && seq <= self.last {
            self.received += 1;
        }
    }

    /// Where a read that ended early resumes: after the last message read, when that
    /// is not past the range. None before the first message (a read that never
    /// started has no position to resume at; the count check judges it).
    pub fn resume_at(&self) -> Option<u64> {
        self.next.filter(|next| *next <= self.last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHOLE: Holding = Holding {
        first: 1,
        last: 100,
        messages: 100,
    };

    #[test]
    fn a_stream_with_every_sequence_holds_any_range_inside_it() {
        assert!(WHOLE.holds_every_sequence(1, 100));
        assert!(WHOLE.holds_every_sequence(40, 60));
        assert!(
            !WHOLE.holds_every_sequence(40, 101),
            "past its last sequence"
        );
        assert!(!WHOLE.holds_every_sequence(61, 60), "an empty range");
    }

    #[test]
    fn a_stream_with_a_deleted_message_or_a_moved_head_does_not() {
        let deleted = Holding {
            messages: 99,
            ..WHOLE
        };
        assert!(!deleted.holds_every_sequence(1, 100));
        let purged = Holding {
            first: 41,
            messages: 60,
            ..WHOLE
        };
        assert!(!purged.holds_every_sequence(40, 100));
        assert!(purged.holds_every_sequence(41, 100));
        let empty = Holding {
            first: 101,
            last: 100,
            messages: 0,
        };
        assert!(!empty.holds_every_sequence(1, 100));
    }

    #[test]
    fn a_short_read_of_a_stream_that_holds_every_sequence_is_incomplete() {
        let err = incomplete("S", 10, 100, 90, WHOLE).expect("an error");
        assert_eq!(err.kind(), ErrorKind::Api);
        assert_eq!(
            err.message(),
            "the read of stream \"S\" sequences 10..100 returned 90 messages where the \
             stream holds 91; the read is incomplete"
        );
        assert!(incomplete("S", 10, 100, 92, WHOLE).is_some(), "too many");
    }

    #[test]
    fn a_whole_read_or_a_stream_that_lost_messages_is_not() {
        assert!(incomplete("S", 10, 100, 91, WHOLE).is_none());
        let head_moved = Holding {
            first: 20,
            messages: 81,
            ..WHOLE
        };
        assert!(incomplete("S", 10, 100, 85, head_moved).is_none());
        let deleted = Holding {
            messages: 99,
            ..WHOLE
        };
        assert!(incomplete("S", 10, 100, 90, deleted).is_none());
    }

    #[test]
    fn progress_counts_the_owed_range_and_resumes_inside_it() {
        let mut progress = Progress {
            start: Some(10),
            last: 12,
            next: None,
            received: 0,
            count_checked: true,
        };
        assert_eq!(progress.resume_at(), None, "nothing read yet");
        progress.delivered(10);
        progress.delivered(11);
        assert_eq!((progress.received, progress.resume_at()), (2, Some(12)));
        progress.delivered(12);
        assert_eq!(progress.resume_at(), None, "the range is read");
        progress.delivered(13);
        assert_eq!(progress.received, 3, "a message past the range is not owed");
    }
}
