//! The identity of a copied message: a table read from a stream and published again
//! (a copy) gives each row a `Nats-Msg-Id` made of the message it was read from, so a
//! retried or re-run copy sends every message under the id it had the first time.

use async_nats::HeaderMap;

use crate::api::headers::MSG_ID;

/// The identity of a copied row: `<stream>:<seq>:<digest>`, the digest the first 8
/// bytes (hex) of SHA-256 over its subject, payload and headers (names sorted; the
/// msg id a copy replaces left out). The source message names it across runs and
/// retries; the digest tells apart rows made of one message that differ (an explode,
/// a fan-out by header) and a message that took a recreated stream's old sequence.
pub fn copy_identity(
    stream: &str,
    seq: i64,
    subject: &str,
    payload: &[u8],
    headers: Option<&HeaderMap>,
) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(subject.as_bytes());
    hasher.update([0]);
    hasher.update(payload);
    if let Some(headers) = headers {
        let mut entries: Vec<_> = headers
            .iter()
            .map(|(name, values)| (AsRef::<str>::as_ref(name), values))
            .filter(|(name, _)| !name.eq_ignore_ascii_case(MSG_ID))
            .collect();
        entries.sort_by_key(|(name, _)| *name);
        for (name, values) in entries {
            for value in values {
                // Lengths first, so no two header blocks hash alike.
                hasher.update((name.len() as u64).to_le_bytes());
                hasher.update(name.as_bytes());
                hasher.update((value.as_str().len() as u64).to_le_bytes());
                hasher.update(value.as_str().as_bytes());
            }
        }
    }
    let digest = hasher.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{stream}:{seq}:{hex}")
}

/// Rows of a copy alike in everything (one source message, subject, payload and
/// headers: an explode of repeated values) are told apart by their order: the n-th
/// repeat among the consecutive rows of one source message is `<identity>:<n>`. The
/// count restarts at each new source message, so a retried task, which sends the
/// same rows in the same order, gives each the same id again; it continues across
/// the calls of one publisher, whose rows are one input.
#[derive(Debug, Default)]
pub struct CopyRepeats {
    source: Option<(String, i64)>,
    seen: std::collections::HashMap<String, u32>,
}

impl CopyRepeats {
    /// The msg id of a row whose source message and identity are these.
    pub(super) fn id(&mut self, stream: &str, seq: i64, identity: String) -> String {
        if self
            .source
            .as_ref()
            .is_none_or(|(s, q)| *q != seq || s != stream)
        {
            self.source = Some((stream.to_string(), seq));
            self.seen.clear();
        }
        let repeats = self.seen.entry(identity.clone()).or_insert(0);
        let id = match *repeats {
            0 => identity,
            n => format!("{identity}:{n}"),
        };
        *repeats += 1;
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_the_source_and_a_digest_of_what_the_row_carries() {
        let id = copy_identity("SRC", 7, "a", b"x", None);
        assert!(
            id.starts_with("SRC:7:") && id.len() == "SRC:7:".len() + 16,
            "{id}"
        );
        // Known value: SHA-256 of "a\0x", its first 8 bytes.
        assert_eq!(id, "SRC:7:8b86bced10290476");
        assert_ne!(id, copy_identity("SRC", 7, "a", b"y", None), "payload");
        assert_ne!(id, copy_identity("SRC", 7, "b", b"x", None), "subject");
        assert_ne!(id, copy_identity("SRC", 8, "a", b"x", None), "sequence");
        // The subject and payload are told apart, not run together.
        assert_ne!(
            copy_identity("S", 1, "ab", b"c", None),
            copy_identity("S", 1, "a", b"bc", None)
        );
    }

    #[test]
    fn headers_count_in_any_order_and_the_replaced_msg_id_does_not() {
        let mut one = HeaderMap::new();
        one.insert("b", "2");
        one.insert("a", "1");
        let mut other = HeaderMap::new();
        other.insert("a", "1");
        other.insert("b", "2");
        other.insert("Nats-Msg-Id", "original");
        let id = copy_identity("SRC", 7, "a", b"x", Some(&one));
        assert_eq!(id, copy_identity("SRC", 7, "a", b"x", Some(&other)));
        assert_ne!(id, copy_identity("SRC", 7, "a", b"x", None));
        // Lengths first: a name and value split elsewhere is another header block.
        let mut split = HeaderMap::new();
        split.insert("ab", "");
        let mut joined = HeaderMap::new();
        joined.insert("a", "b");
        assert_ne!(
            copy_identity("SRC", 7, "a", b"x", Some(&split)),
            copy_identity("SRC", 7, "a", b"x", Some(&joined))
        );
    }

    #[test]
    fn alike_rows_of_one_source_are_numbered_by_their_order() {
        // Rows alike in everything, one after another, are numbered by their order;
        // the count restarts at the next source message.
        let mut repeats = CopyRepeats::default();
        let ids: Vec<String> = [("SRC", 7), ("SRC", 7), ("SRC", 7), ("SRC", 8), ("SRC", 7)]
            .iter()
            .map(|(s, q)| repeats.id(s, *q, format!("{s}:{q}:d")))
            .collect();
        assert_eq!(
            ids,
            ["SRC:7:d", "SRC:7:d:1", "SRC:7:d:2", "SRC:8:d", "SRC:7:d"]
        );
    }
}
