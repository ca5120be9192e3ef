//! Option values as a caller gives them, checked once here: counts of any integer size
//! and durations in seconds become the engine's types, or an error naming the option.
//! [`OptionValue`] is a value of any kind, as the bindings hand it to a declared
//! struct's setter; [`OptionType`] turns it into a field's Rust type, checking the
//! field's declared bounds and choices.

use std::fmt::Display;
use std::path::PathBuf;
use std::time::Duration;

use super::table::{Kind, Limit, OptionDecl};
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
        Error::bad_input(format!(
            "option '{option}' ({value}) out of range: counts and sequences are \
             non-negative integers up to {}",
            T::MAX
        ))
    })
}

/// An optional count.
pub fn opt_count<T: Count>(value: Option<i128>, option: &str) -> Result<Option<T>> {
    value.map(|v| count(v, option)).transpose()
}

/// A duration given in seconds as option `option`.
pub fn seconds(value: f64, option: &str) -> Result<Duration> {
    if value > crate::limits::MAX_SECONDS {
        return Err(Error::bad_input(format!(
            "option '{option}' must be at most {:e} seconds, got {value}",
            crate::limits::MAX_SECONDS
        )));
    }
    Duration::try_from_secs_f64(value).map_err(|_| {
        Error::bad_input(format!(
            "option '{option}' must be a non-negative number of seconds, got {value}"
        ))
    })
}

/// A duration in seconds as option `option` that must be more than nothing (a
/// timeout, a delay between tries): a value that rounds to no time at all is named
/// as given.
pub fn positive_seconds(value: f64, option: &str) -> Result<Duration> {
    let refused = || {
        Error::bad_input(format!(
            "option '{option}' must be a positive number of seconds, got {value}"
        ))
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

/// A Rust type a declared option may have: its [`Kind`], its natural bounds, and
/// its value read from an [`OptionValue`], checked against the declaration.
pub trait OptionType: Sized {
    const KIND: Kind;
    /// Whether the type itself takes None (an `Option`).
    const OPTIONAL: bool = false;
    /// A choice's names.
    const CHOICES: &'static [&'static str] = &[];
    /// The bounds any value of the type has, unless the declaration narrows them.
    fn natural_minimum() -> Option<Limit> {
        None
    }
    fn natural_maximum() -> Option<Limit> {
        None
    }
    /// The value, checked against `decl` (its bounds), or an error naming it.
    fn from_option(value: OptionValue, decl: &OptionDecl) -> Result<Self>;
}

/// The error of a value of the wrong kind, named as the bindings name it.
pub fn wrong_kind(decl: &OptionDecl, got: &OptionValue) -> Error {
    let or_none = if decl.nullable { ", or None" } else { "" };
    Error::bad_input(format!(
        "option '{}' must be {}{or_none}, got {}",
        decl.name,
        decl.kind.must_be(),
        match got {
            OptionValue::None => "None".to_string(),
            OptionValue::Int(n) => n.to_string(),
            OptionValue::Float(f) => f.to_string(),
            OptionValue::Bool(b) => if *b { "True" } else { "False" }.to_string(),
            OptionValue::Text(s) => format!("{s:?}"),
            OptionValue::Texts(t) => format!("{t:?}"),
            OptionValue::Path(p) => format!("{p:?}"),
            OptionValue::Bytes(b) => format!("{} bytes", b.len()),
        }
    ))
}

/// A count within the declaration's bounds: today's texts, "at least" for a lower
/// bound alone, "between" for both.
fn bounded_count<T: Count + Into<u64>>(value: i128, decl: &OptionDecl) -> Result<T> {
    let n: T = count(value, decl.name)?;
    let min = (decl.minimum)().map(|m| m.as_f64() as u64).unwrap_or(0);
    let max = (decl.maximum)().map(|m| m.as_f64() as u64);
    let v: u64 = n.into();
    let natural_max = T::MAX.into();
    match max.filter(|&m| m < natural_max) {
        Some(max) if v < min || v > max => Err(Error::bad_input(format!(
            "option '{}' must be between {min} and {max}, got {v}",
            decl.name
        ))),
        _ if v < min => Err(Error::bad_input(format!(
            "option '{}' must be at least {min}",
            decl.name
        ))),
        _ => Ok(n),
    }
}

macro_rules! count_types {
    ($($ty:ty),*) => {$(
        impl OptionType for $ty {
            const KIND: Kind = Kind::Count;
            fn natural_minimum() -> Option<Limit> {
                Some(Limit::Int(0))
            }
            fn natural_maximum() -> Option<Limit> {
                Some(Limit::Int(<$ty>::MAX as u64))
            }
            fn from_option(value: OptionValue, decl: &OptionDecl) -> Result<Self> {
                match value {
                    OptionValue::Int(n) => bounded_count(n, decl),
                    other => Err(wrong_kind(decl, &other)),
                }
            }
        }
    )*};
}
count_types!(u32, u64);

impl OptionType for usize {
    const KIND: Kind = Kind::Count;
    fn natural_minimum() -> Option<Limit> {
        Some(Limit::Int(0))
    }
    fn natural_maximum() -> Option<Limit> {
        Some(Limit::Int(usize::MAX as u64))
    }
    fn from_option(value: OptionValue, decl: &OptionDecl) -> Result<Self> {
        match value {
            OptionValue::Int(n) => Ok(bounded_count::<u64>(n, decl)? as usize),
            other => Err(wrong_kind(decl, &other)),
        }
    }
}

impl OptionType for Duration {
    const KIND: Kind = Kind::Seconds;
    fn natural_minimum() -> Option<Limit> {
        Some(Limit::Float(0.0))
    }
    fn natural_maximum() -> Option<Limit> {
        Some(Limit::Float(crate::limits::MAX_SECONDS))
    }
    /// A declared minimum above zero makes it a duration that must be more than
    /// nothing (a timeout, a delay between tries).
    fn from_option(value: OptionValue, decl: &OptionDecl) -> Result<Self> {
        let secs = match value {
            OptionValue::Float(f) => f,
            OptionValue::Int(n) => n as f64,
            other => return Err(wrong_kind(decl, &other)),
        };
        if (decl.minimum)().is_some_and(|m| m.as_f64() > 0.0) {
            positive_seconds(secs, decl.name)
        } else {
            seconds(secs, decl.name)
        }
    }
}

impl OptionType for f64 {
    const KIND: Kind = Kind::Number;
    fn from_option(value: OptionValue, decl: &OptionDecl) -> Result<Self> {
        match value {
            OptionValue::Float(f) => Ok(f),
            OptionValue::Int(n) => Ok(n as f64),
            other => Err(wrong_kind(decl, &other)),
        }
    }
}

/// A time: nanoseconds since the epoch.
impl OptionType for i64 {
    const KIND: Kind = Kind::Time;
    fn from_option(value: OptionValue, decl: &OptionDecl) -> Result<Self> {
        match value {
            OptionValue::Int(n) => i64::try_from(n).map_err(|_| {
                Error::bad_input(format!(
                    "option '{}' ({n} ns since the epoch) out of range",
                    decl.name
                ))
            }),
            other => Err(wrong_kind(decl, &other)),
        }
    }
}

impl OptionType for bool {
    const KIND: Kind = Kind::Bool;
    fn from_option(value: OptionValue, decl: &OptionDecl) -> Result<Self> {
        match value {
            OptionValue::Bool(b) => Ok(b),
            other => Err(wrong_kind(decl, &other)),
        }
    }
}

impl OptionType for String {
    const KIND: Kind = Kind::Text;
    fn from_option(value: OptionValue, decl: &OptionDecl) -> Result<Self> {
        match value {
            OptionValue::Text(s) => Ok(s),
            other => Err(wrong_kind(decl, &other)),
        }
    }
}

/// A list of strings; not given, none.
impl OptionType for Vec<String> {
    const KIND: Kind = Kind::Texts;
    const OPTIONAL: bool = true;
    fn from_option(value: OptionValue, decl: &OptionDecl) -> Result<Self> {
        match value {
            OptionValue::None => Ok(Vec::new()),
            OptionValue::Texts(t) => Ok(t),
            OptionValue::Text(s) => Ok(vec![s]),
            other => Err(wrong_kind(decl, &other)),
        }
    }
}

impl OptionType for PathBuf {
    const KIND: Kind = Kind::Path;
    fn from_option(value: OptionValue, decl: &OptionDecl) -> Result<Self> {
        match value {
            OptionValue::Path(p) => Ok(p),
            OptionValue::Text(s) => Ok(PathBuf::from(s)),
            other => Err(wrong_kind(decl, &other)),
        }
    }
}

impl OptionType for Vec<u8> {
    const KIND: Kind = Kind::Bytes;
    fn from_option(value: OptionValue, decl: &OptionDecl) -> Result<Self> {
        match value {
            OptionValue::Bytes(b) => Ok(b),
            other => Err(wrong_kind(decl, &other)),
        }
    }
}

impl<T: OptionType> OptionType for Option<T> {
    const KIND: Kind = T::KIND;
    const OPTIONAL: bool = true;
    const CHOICES: &'static [&'static str] = T::CHOICES;
    fn natural_minimum() -> Option<Limit> {
        T::natural_minimum()
    }
    fn natural_maximum() -> Option<Limit> {
        T::natural_maximum()
    }
    fn from_option(value: OptionValue, decl: &OptionDecl) -> Result<Self> {
        match value {
            OptionValue::None => Ok(None),
            value => T::from_option(value, decl).map(Some),
        }
    }
}

/// One of a closed set of names: an enum an option chooses. Its `parse` names the
/// option and the names it takes.
pub trait Choice: Sized {
    const NAMES: &'static [&'static str];
    fn parse(name: &str) -> Result<Self>;
}

/// [`OptionType`] for a [`Choice`] (a blanket impl would overlap `Option`'s).
#[macro_export]
macro_rules! choice_option {
    ($($ty:ty),*) => {$(
        impl $crate::options::OptionType for $ty {
            const KIND: $crate::options::Kind = $crate::options::Kind::Choice;
            const CHOICES: &'static [&'static str] =
                <$ty as $crate::options::Choice>::NAMES;
            fn from_option(
                value: $crate::options::OptionValue,
                decl: &$crate::options::OptionDecl,
            ) -> $crate::error::Result<Self> {
                match value {
                    $crate::options::OptionValue::Text(name) => {
                        <$ty as $crate::options::Choice>::parse(&name)
                    }
                    other => Err($crate::options::values::wrong_kind(decl, &other)),
                }
            }
        }
    )*};
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
