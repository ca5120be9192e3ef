//! An option's value converted into its field's Rust type: [`OptionType`] says, per
//! type, the option's kind and natural bounds, and checks a value against the
//! declaration (bounds, choices), naming the option in the error.

use std::path::PathBuf;
use std::time::Duration;

use super::table::{Kind, Limit, OptionDecl};
use super::values::{count, positive_seconds, seconds, Count, OptionValue};
use crate::error::{Error, Result};

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
    Error::bad_option(
        decl.name,
        format!(
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
                OptionValue::Bytes(b) => format!("{} bytes", b.len(),),
            }
        ),
    )
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
        Some(max) if v < min || v > max => Err(Error::bad_option(
            decl.name,
            format!(
                "option '{}' must be between {min} and {max}, got {v}",
                decl.name
            ),
        )),
        _ if v < min => Err(Error::bad_option(
            decl.name,
            format!("option '{}' must be at least {min}", decl.name),
        )),
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
                Error::bad_option(
                    decl.name,
                    format!(
                        "option '{}' ({n} ns since the epoch) out of range",
                        decl.name
                    ),
                )
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
                    other => Err($crate::options::convert::wrong_kind(decl, &other)),
                }
            }
        }
    )*};
}
