//! Whether two subject patterns (with `*` for one token and `>` for the rest) can
//! match a common subject: a read's filter that shares no subject with any of the
//! stream's subjects can never return a message, and is refused instead of giving
//! an empty result.

/// Whether some subject matches both `a` and `b`.
pub fn overlap(a: &str, b: &str) -> bool {
    let mut a = a.split('.');
    let mut b = b.split('.');
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            // `>` stands for one or more tokens.
            (Some(">"), Some(_)) | (Some(_), Some(">")) => return true,
            (Some(x), Some(y)) => {
                if x != "*" && y != "*" && x != y {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// The filters of `filters` that no subject of `stream_subjects` can match.
pub fn unmatched<'a>(filters: &'a [String], stream_subjects: &[String]) -> Vec<&'a str> {
    filters
        .iter()
        .filter(|f| !stream_subjects.iter().any(|s| overlap(f, s)))
        .map(String::as_str)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_overlap_token_by_token() {
        assert!(overlap("orders.new", "orders.>"));
        assert!(overlap("orders.*", "orders.>"));
        assert!(overlap("orders.*.eu", "orders.new.*"));
        assert!(overlap(">", "a"));
        assert!(overlap("a.b", "a.b"));
        assert!(!overlap("A.B", "orders.>"));
        assert!(!overlap("orders", "orders.>"));
        assert!(!overlap("orders.new.x", "orders.*"));
        assert!(!overlap("orders.*", "orders.new.x"));
        assert!(!overlap("a.b", "a.c"));
    }

    #[test]
    fn unmatched_filters_are_named() {
        let stream = vec!["orders.>".to_string(), "audit".to_string()];
        let filters = vec![
            "orders.eu".to_string(),
            "A.B".to_string(),
            "audit".to_string(),
        ];
        assert_eq!(unmatched(&filters, &stream), ["A.B"]);
    }
}
