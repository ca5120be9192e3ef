//! The metadata of a delivered JetStream message, read from its ack reply subject:
//! `$JS.ACK.<stream>.<consumer>.<delivered>.<stream_seq>.<consumer_seq>.<ts_ns>.<pending>`
//! or, with domain and account hash, `$JS.ACK.<domain>.<acc>.<stream>.<consumer>...`.

/// What the reply subject says about a delivered message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageMetadata {
    pub delivered: u64,
    pub stream_seq: u64,
    pub consumer_seq: u64,
    pub timestamp_ns: i64,
    pub pending: u64,
}

/// Parse an ack reply subject; None when it is not one.
pub fn parse_ack_subject(reply: &str) -> Option<MessageMetadata> {
    let rest = reply.strip_prefix("$JS.ACK.")?.as_bytes();
    // Called once per delivered message: the dots found by one pass over the bytes
    // into a fixed array, nothing allocated.
    let mut starts = [0usize; 13];
    let mut count = 1;
    for (i, b) in rest.iter().enumerate() {
        if *b == b'.' {
            if count == starts.len() - 1 {
                return None;
            }
            starts[count] = i + 1;
            count += 1;
        }
    }
    starts[count] = rest.len() + 1;
    let token = |k: usize| &rest[starts[k]..starts[k + 1] - 1];
    // v1: stream, consumer, then 5 numbers. v2: domain, account hash, stream,
    // consumer, 5 numbers, and a random token (plus possible future tokens).
    let first = match count {
        7 => 2,
        n if n >= 9 => 4,
        _ => return None,
    };
    Some(MessageMetadata {
        delivered: decimal(token(first))?,
        stream_seq: decimal(token(first + 1))?,
        consumer_seq: decimal(token(first + 2))?,
        timestamp_ns: i64::try_from(decimal(token(first + 3))?).ok()?,
        pending: decimal(token(first + 4))?,
    })
}

/// The unsigned decimal number `digits` spell; None for anything else or an overflow.
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, d| {
        let digit = d.wrapping_sub(b'0');
        (digit < 10).then_some(())?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// A message as a consumer or a direct get handed it out, with the metadata of its
/// reply subject.
pub struct Delivered {
    pub message: async_nats::Message,
    pub meta: MessageMetadata,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_forms() {
        let v1 = parse_ack_subject("$JS.ACK.ORDERS.c1.2.100.7.1700000000000000000.5").unwrap();
        assert_eq!(
            v1,
            MessageMetadata {
                delivered: 2,
                stream_seq: 100,
                consumer_seq: 7,
                timestamp_ns: 1_700_000_000_000_000_000,
                pending: 5
            }
        );
        let v2 = parse_ack_subject("$JS.ACK.hub.ACCHASH.ORDERS.c1.1.9.3.1700000000000000001.0.xyz")
            .unwrap();
        assert_eq!((v2.stream_seq, v2.consumer_seq, v2.pending), (9, 3, 0));
        assert!(parse_ack_subject("_INBOX.abc").is_none());
        assert!(parse_ack_subject("$JS.ACK.S.c.x.1.1.1.1").is_none());
        assert!(parse_ack_subject("$JS.ACK.S.c.1..1.1.1").is_none());
        assert!(parse_ack_subject("$JS.ACK.S.c.1.+1.1.1.1").is_none());
        assert!(parse_ack_subject("$JS.ACK.S.c.1.1.1.99999999999999999999.1").is_none());
        assert!(parse_ack_subject("$JS.ACK.a.b.c.d.e.f.g.h.i.j.k.l.m.n").is_none());
    }
}
