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
    let rest = reply.strip_prefix("$JS.ACK.")?;
    // Called once per delivered message: split into a fixed array, no allocation.
    let mut tokens = [""; 12];
    let mut count = 0;
    for token in rest.split('.') {
        if count == tokens.len() {
            return None;
        }
        tokens[count] = token;
        count += 1;
    }
    // v1: stream, consumer, then 5 numbers. v2: domain, account hash, stream,
    // consumer, 5 numbers, and a random token (plus possible future tokens).
    let numbers = match count {
        7 => &tokens[2..7],
        n if n >= 9 => &tokens[4..9],
        _ => return None,
    };
    Some(MessageMetadata {
        delivered: numbers[0].parse().ok()?,
        stream_seq: numbers[1].parse().ok()?,
        consumer_seq: numbers[2].parse().ok()?,
        timestamp_ns: numbers[3].parse().ok()?,
        pending: numbers[4].parse().ok()?,
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
    }
}
