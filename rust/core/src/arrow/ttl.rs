//! A stored message's `Nats-TTL` as the server reads it, for a read's `ttl` column.
//!
//! The server keeps the header as the publisher wrote it (or, where it raised a TTL
//! to the stream's `subject_delete_marker_ttl`, as whole seconds `"N"`; on a marker,
//! as a Go duration such as `"5s"` or `"1m0s"`) and reads it with nats-server's
//! `parseMessageTTL` (`server/stream.go`): `never` (any case) never expires; else a Go
//! duration (`time.ParseDuration`: `"90s"`, `"1.5h"`, `"1h30m"`) of at least one
//! second, truncated to whole seconds; else whole seconds as digits (`"60"`), where
//! `0` means no TTL of its own. This module reads it the same way, so the column says
//! what the server does with the message.

use arrow_schema::{DataType, TimeUnit};

/// The type of a read's `ttl` column: whole seconds, as the server keeps them.
pub const TTL_TYPE: DataType = DataType::Duration(TimeUnit::Second);

/// The `ttl` value that stands for `never` (the server's own number for it): a
/// duration cannot say "never", and -1 s is no TTL a publish could mean otherwise.
pub const NEVER_SECONDS: i64 = -1;

/// What a `Nats-TTL` header means to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredTtl {
    /// Removed this many seconds after it was stored.
    Seconds(i64),
    /// `never`: kept past the stream's `max_age`.
    Never,
    /// No TTL of its own (`0`): the stream's limits apply.
    None,
    /// Text the server refuses as a TTL (it cannot be in a stream that checked it).
    Invalid,
}

impl StoredTtl {
    /// The value of a read's `ttl` column (seconds; [`NEVER_SECONDS`] for never; None
    /// for no TTL of its own, or text the server would refuse).
    pub fn column_value(self) -> Option<i64> {
        match self {
            Self::Seconds(s) => Some(s),
            Self::Never => Some(NEVER_SECONDS),
            Self::None | Self::Invalid => None,
        }
    }
}

/// nats-server's `parseMessageTTL`.
pub fn parse_stored(value: &str) -> StoredTtl {
    if value.eq_ignore_ascii_case("never") {
        return StoredTtl::Never;
    }
    if let Some(ns) = parse_go_duration(value) {
        return if ns < 1_000_000_000 {
            StoredTtl::Invalid
        } else {
            StoredTtl::Seconds((ns / 1_000_000_000) as i64)
        };
    }
    // The server's parseInt64: digits only, no sign, nothing else.
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return StoredTtl::Invalid;
    }
    match value.parse::<i64>() {
        Ok(0) => StoredTtl::None,
        Ok(s) => StoredTtl::Seconds(s),
        Err(_) => StoredTtl::Invalid,
    }
}

/// Go's `time.ParseDuration`, in nanoseconds (None where Go fails: no unit, an unknown
/// unit, more than an int64 of nanoseconds).
fn parse_go_duration(text: &str) -> Option<i128> {
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(after) = rest.strip_prefix('.') {
            let frac_len = after.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &after[..frac_len];
            rest = &after[frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return None; // no digits before the unit
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(i, _)| i);
        let unit: i128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None, // missing or unknown unit
        };
        rest = &rest[unit_len..];
        let whole: i128 = if int_part.is_empty() {
            0
        } else {
            int_part
                .parse::<i128>()
                .ok()
                .filter(|v| *v <= i64::MAX as i128)?
        };
        let mut value = whole.checked_mul(unit)?;
        if !frac_part.is_empty() {
            // Go keeps the fraction's first digits that fit and scales them.
            let digits = &frac_part[..frac_part.len().min(18)];
            let frac: i128 = digits.parse().ok()?;
            value += frac * unit / 10i128.pow(digits.len() as u32);
        }
        total = total.checked_add(value)?;
        if total > i64::MAX as i128 {
            return None;
        }
    }
    Some(if negative { -total } else { total })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_read_as_the_server_reads_them() {
        use StoredTtl::*;
        for (text, want) in [
            ("never", Never),
            ("NEVER", Never),
            ("60s", Seconds(60)),
            ("5m", Seconds(300)),
            ("1m0s", Seconds(60)),
            ("1h30m", Seconds(5400)),
            ("1.5h", Seconds(5400)),
            ("1.9s", Seconds(1)),
            ("1500ms", Seconds(1)),
            ("60", Seconds(60)),
            ("0", Invalid), // Go parses "0" as a duration, below a second
            ("00", None),
            ("500ms", Invalid),
            ("-5s", Invalid),
            ("-5", Invalid),
            ("", Invalid),
            ("5 s", Invalid),
            ("5d", Invalid),
            ("forever", Invalid),
        ] {
            assert_eq!(parse_stored(text), want, "{text:?}");
        }
        assert_eq!(parse_stored("never").column_value(), Some(NEVER_SECONDS));
        assert_eq!(parse_stored("00").column_value(), Option::None);
    }
}
