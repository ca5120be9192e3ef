//! Stream and consumer names: the one rule, used by every check in Rust and (through
//! `jetstream_arrow._core.validate_name`) in Python.
//!
//! Names become subject tokens (`$JS.API.STREAM.INFO.<name>`) and directory names on
//! the server, so the server refuses whitespace, `.`, `*`, `>` and path separators.

use crate::error::{Error, Result};

/// Characters a stream or consumer name may not contain (besides whitespace).
pub const FORBIDDEN_NAME_CHARS: [char; 5] = ['.', '*', '>', '/', '\\'];

/// Check a stream or consumer name given as `option`; the error names the option and
/// the offending character.
pub fn validate_name(value: &str, option: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::bad_input(format!(
            "option '{option}' must be a non-empty name"
        )));
    }
    if let Some(bad) = value
        .chars()
        .find(|c| c.is_whitespace() || FORBIDDEN_NAME_CHARS.contains(c))
    {
        return Err(Error::bad_input(format!(
            "option '{option}': {value:?} is not a valid name: it contains {bad:?}; names may \
             not contain whitespace, '.', '*', '>' or slashes"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_servers_rule() {
        assert!(validate_name("ORDERS_2", "stream").is_ok());
        for bad in ["", "a.b", "a*", "a>", "a b", "a/b", "a\\b", "a\tb"] {
            let err = validate_name(bad, "stream").unwrap_err();
            assert!(err.message().contains("'stream'"), "{err}");
        }
    }
}
