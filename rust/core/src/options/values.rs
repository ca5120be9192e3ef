//! Option values as a caller gives them, checked once here: counts of any integer size
//! and durations in seconds become the engine's types, or an error naming the option.
//! [`OptionValue`] is a value of any kind, as the bindings hand it to a declared
//! struct's setter (`convert.rs` turns it into a field's Rust type).

use std::fmt::Display;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
/// An unsigned count or sequence type an option may have.
pub trait Count: TryFrom<i128> + Display + Copy {
    const MAX: Self;
}

impl Count for u32 {
    const MAX: Self = u32::MAX;
}

impl Count for u64 {
    const MAX: Self = u64::MAX;
}

impl Count for usize {
    const MAX: Self = usize::MAX;
}

/// `value` of option `option` as the count type `T`: negative or too large values are
/// refused naming the option (callers may give any integer).
pub fn count<T: Count>(value: i128, option: &str) -> Result<T> {
    T::try_from(value).map_err(|_| {
        Error::bad_option(
            option,
            format!(
                "option '{option}' ({value}) out of range: counts and sequences are \
             non-negative integers up to {}",
                T::MAX
            ),
        )
    })
}

/// An optional count.
pub fn opt_count<T: Count>(value: Option<i128>, option: &str) -> Result<Option<T>> {
    value.map(|v| count(v, option)).transpose()
}

/// A duration given in seconds as option `option`.
pub fn seconds(value: f64, option: &str) -> Result<Duration> {
    if value > crate::limits::MAX_SECONDS {
        return Err(Error::bad_option(
            option,
            format!(
                "option '{option}' must be at most {:e} seconds, got {value}",
                crate::limits::MAX_SECONDS
            ),
        ));
    }
    Duration::try_from_secs_f64(value).map_err(|_| {
        Error::bad_option(
            option,
            format!("option '{option}' must be a non-negative number of seconds, got {value}"),
        )
    })
}

/// A duration in seconds as option `option` that must be more than nothing (a
/// timeout, a delay between tries): a value that rounds to no time at all is named
/// as given.
pub fn positive_seconds(value: f64, option: &str) -> Result<Duration> {
    let refused = || {
        Error::bad_option(
            option,
            format!("option '{option}' must be a positive number of seconds, got {value}"),
        )
    };
    if value.is_nan() || value <= 0.0 {
        return Err(refused());
    }
    let duration = seconds(value, option)?;
    if duration.is_zero() {
        return Err(refused());
    }
    Ok(duration)
}

/// An optional duration in seconds.
pub fn opt_seconds(value: Option<f64>, option: &str) -> Result<Option<Duration>> {
    value.map(|v| seconds(v, option)).transpose()
}

/// A value of any kind, as a caller gives it (the bindings convert by the declared
/// [`Kind`]: a time to nanoseconds, one string of a list to a list of one).
#[derive(Debug, Clone, PartialEq)]
pub enum OptionValue {
    /// Not given: an optional option's None, or another's default.
    None,
    Int(i128),
    Float(f64),
    Bool(bool),
    Text(String),
    Texts(Vec<String>),
    Path(PathBuf),
    Bytes(Vec<u8>),
}

macro_rules! int_values {
    ($($ty:ty),*) => {$(
        impl From<$ty> for OptionValue {
            fn from(n: $ty) -> Self {
                Self::Int(n as i128)
            }
        }
    )*};
}
int_values!(u32, u64, usize, i64);

impl From<Duration> for OptionValue {
    fn from(d: Duration) -> Self {
        Self::Float(d.as_secs_f64())
    }
}

impl From<f64> for OptionValue {
    fn from(f: f64) -> Self {
        Self::Float(f)
    }
}

impl From<bool> for OptionValue {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}

impl From<&str> for OptionValue {
    fn from(s: &str) -> Self {
        Self::Text(s.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_out_of_range_name_the_option() {
        assert_eq!(count::<usize>(7, "window").unwrap(), 7);
        for bad in [-1, 1_i128 << 70] {
            let e = count::<u64>(bad, "start_seq").unwrap_err().to_string();
            assert!(
                e.contains(&format!("option 'start_seq' ({bad}) out of range")),
                "{e}"
            );
        }
        assert!(count::<u32>(u32::MAX as i128 + 1, "max_retries").is_err());
    }

    #[test]
    fn seconds_are_checked() {
        assert_eq!(
            seconds(1.5, "ack_timeout").unwrap(),
            Duration::from_millis(1500)
        );
        assert!(seconds(-1.0, "ack_timeout").is_err());
        assert!(seconds(f64::NAN, "ack_timeout").is_err());
        assert!(seconds(1e9, "resume_timeout").is_ok());
        let e = seconds(1e19, "resume_timeout").unwrap_err().to_string();
        assert!(
            e.contains("option 'resume_timeout' must be at most 1e9 seconds"),
            "{e}"
        );
    }

    #[test]
    fn positive_seconds_name_the_value_given() {
        assert_eq!(
            positive_seconds(0.25, "ping_interval").unwrap(),
            Duration::from_millis(250)
        );
        for bad in [0.0, -1.0, f64::NAN, 1e-12] {
            let e = positive_seconds(bad, "connect_timeout")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!(
                    "option 'connect_timeout' must be a positive number of seconds, got {bad}"
                )),
                "{e}"
            );
        }
        assert!(positive_seconds(2e9, "connect_timeout")
            .unwrap_err()
            .to_string()
            .contains("at most"));
    }
}
