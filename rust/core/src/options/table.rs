//! What a declared option is, as a table row: the shape the bindings export (Python's
//! `_core.OPTION_TABLES`) and the one the setter checks values against.

use super::values::OptionValue;

/// How an option's value is given, whatever Rust type holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole number: a count, a size in bytes or a sequence.
    Count,
    /// A duration in seconds (a float).
    Seconds,
    Bool,
    Text,
    /// One of a closed set of names ([`OptionDecl::choices`]).
    Choice,
    /// A list of strings (one string is a list of one).
    Texts,
    /// A file's path.
    Path,
    /// An instant: nanoseconds since the epoch (Python gives a datetime, ISO text or
    /// epoch seconds).
    Time,
    /// Raw bytes.
    Bytes,
    /// Any number.
    Number,
}

impl Kind {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Count => "count",
            Self::Seconds => "seconds",
            Self::Bool => "bool",
            Self::Text => "text",
            Self::Choice => "choice",
            Self::Texts => "texts",
            Self::Path => "path",
            Self::Time => "time",
            Self::Bytes => "bytes",
            Self::Number => "number",
        }
    }

    /// What a value of this kind must be, as an error says it.
    pub const fn must_be(self) -> &'static str {
        match self {
            Self::Count => "a whole number",
            Self::Seconds | Self::Number => "a number",
            Self::Bool => "True or False",
            Self::Text | Self::Choice => "a string",
            Self::Texts => "a string or a list of strings",
            Self::Path => "a path (str or os.PathLike)",
            Self::Time => "a datetime, ISO text or epoch seconds",
            Self::Bytes => "bytes",
        }
    }
}

/// A bound of a count or a duration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    Int(u64),
    Float(f64),
}

impl Limit {
    pub fn as_f64(self) -> f64 {
        match self {
            Self::Int(n) => n as f64,
            Self::Float(f) => f,
        }
    }
}

/// A bound as a declaration writes it: a count's as an integer, a duration's in
/// seconds.
pub trait IntoLimit {
    fn into_limit(self) -> Limit;
}

macro_rules! int_limit {
    ($($ty:ty),*) => {$(
        impl IntoLimit for $ty {
            fn into_limit(self) -> Limit {
                Limit::Int(self as u64)
            }
        }
    )*};
}
int_limit!(u32, u64, usize, i32);

impl IntoLimit for f64 {
    fn into_limit(self) -> Limit {
        Limit::Float(self)
    }
}

/// One declared option: a row of its struct's table.
#[derive(Debug, Clone, Copy)]
pub struct OptionDecl {
    /// The name callers give it (Python's dataclass field, the error messages').
    pub name: &'static str,
    pub kind: Kind,
    /// The default, as a value of the option (None: none, or it depends on other
    /// options). The struct's `Default` is made from the same values.
    pub default: fn() -> OptionValue,
    pub minimum: fn() -> Option<Limit>,
    pub maximum: fn() -> Option<Limit>,
    /// The names a choice takes (empty for other kinds).
    pub choices: &'static [&'static str],
    /// Whether None is a value a caller may give (an optional option, or one whose
    /// None means its default).
    pub nullable: bool,
    /// One line saying what it does.
    pub doc: &'static str,
}

impl OptionDecl {
    /// The doc line without the blank rustdoc puts first.
    pub fn doc(&self) -> &'static str {
        self.doc.trim()
    }
}
