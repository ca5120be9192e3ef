//! Every native option, declared once: each options struct of the core (connecting,
//! publishing, reading, consuming, and each value format's settings) is written by
//! [`declare_options!`] from one line per option, which makes its table
//! ([`Declared::TABLE`], exported to Python as `_core.OPTION_TABLES`) and its setter
//! from a value of any kind ([`Declared::set`]). The bindings read every options
//! object one way: by walking the table.
//!
//! - `table.rs`: what a declared option is ([`OptionDecl`], [`Kind`], [`Limit`]);
//! - `declare.rs`: the declaration macro;
//! - `values.rs`: option values as callers give them ([`OptionValue`]; counts of any
//!   integer size and seconds checked once, naming the option);
//! - `convert.rs`: a value converted into a field's Rust type ([`OptionType`]),
//!   checked against the declaration's bounds and choices.

pub mod convert;
pub mod declare;
pub mod table;
pub mod values;

pub use convert::{Choice, OptionType};
pub use table::{IntoLimit, Kind, Limit, OptionDecl};
pub use values::OptionValue;

use crate::error::{Error, Result};

/// An options struct made by [`declare_options!`].
pub trait Declared: Default {
    /// One row per option, in declaration order.
    const TABLE: &'static [OptionDecl];

    /// Set option `name` from `value`, checked against its declaration.
    fn set(&mut self, name: &str, value: OptionValue) -> Result<()>;

    /// The declaration of option `name`, or an error naming it.
    fn decl(name: &str) -> Result<&'static OptionDecl> {
        Self::TABLE
            .iter()
            .find(|d| d.name == name)
            .ok_or_else(|| Error::bad_option(name, format!("option '{name}' is not known")))
    }

    /// These options with `values` set, each by name: for callers that give
    /// options as pairs (the bindings, tests).
    fn with(
        mut self,
        values: impl IntoIterator<Item = (&'static str, OptionValue)>,
    ) -> Result<Self> {
        for (name, value) in values {
            self.set(name, value)?;
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::codec::OnMalformed;

    crate::declare_options! {
        /// A struct declared as the core's are.
        #[derive(Debug, Clone)]
        struct Example (none_is_default) {
            /// Messages at most.
            window: usize = 8usize, min 1, max 16usize;
            /// A pause.
            pause: Duration = Duration::from_millis(50), min crate::limits::MIN_SECONDS;
            /// A choice.
            mode: OnMalformed = "failfast";
            /// A name.
            name: Option<String>;
        }
        extra {
            /// Set by the call.
            calls: u32 = 7;
        }
    }

    #[test]
    fn the_table_says_what_the_declaration_says() {
        let names: Vec<&str> = Example::TABLE.iter().map(|d| d.name).collect();
        assert_eq!(names, ["window", "pause", "mode", "name"]);
        let window = Example::decl("window").unwrap();
        assert_eq!(window.kind, Kind::Count);
        assert_eq!((window.default)(), OptionValue::Int(8));
        assert_eq!((window.minimum)(), Some(Limit::Int(1)));
        assert_eq!((window.maximum)(), Some(Limit::Int(16)));
        assert_eq!(window.doc(), "Messages at most.");
        let pause = Example::decl("pause").unwrap();
        assert_eq!(pause.kind, Kind::Seconds);
        assert_eq!(
            (pause.maximum)(),
            Some(Limit::Float(crate::limits::MAX_SECONDS))
        );
        let mode = Example::decl("mode").unwrap();
        assert_eq!(mode.kind, Kind::Choice);
        assert_eq!(mode.choices, OnMalformed::NAMES);
        let name = Example::decl("name").unwrap();
        assert_eq!((name.default)(), OptionValue::None);
        assert!(name.nullable && window.nullable);
        assert!(
            Example::decl("calls").is_err(),
            "an extra field is no option"
        );
    }

    #[test]
    fn defaults_and_the_setter_check_and_name_the_option() {
        let d = Example::default();
        assert_eq!(
            (d.window, d.pause, d.calls),
            (8, Duration::from_millis(50), 7)
        );
        assert_eq!(d.mode, OnMalformed::FailFast);
        let e = Example::default()
            .with([
                ("window", OptionValue::Int(12)),
                ("mode", OptionValue::Text("permissive".into())),
                ("name", OptionValue::Text("n".into())),
            ])
            .unwrap();
        assert_eq!(
            (e.window, e.mode, e.name.as_deref()),
            (12, OnMalformed::Permissive, Some("n"))
        );
        // None: the default, for an option that is not an `Option`.
        let mut e = e;
        e.set("window", OptionValue::None).unwrap();
        assert_eq!(e.window, 8);
        let err = |name: &'static str, value: OptionValue| {
            Example::default()
                .with([(name, value)])
                .unwrap_err()
                .to_string()
        };
        assert!(err("window", OptionValue::Int(0))
            .contains("option 'window' must be between 1 and 16, got 0"));
        assert!(err("window", OptionValue::Int(-1)).contains("option 'window' (-1) out of range"));
        assert!(err("window", OptionValue::Text("x".into()))
            .contains("option 'window' must be a whole number, or None, got \"x\""));
        assert!(err("pause", OptionValue::Float(0.0))
            .contains("option 'pause' must be a positive number of seconds, got 0"));
        assert!(err("mode", OptionValue::Text("lenient".into())).contains("on_malformed"));
        assert!(err("nothing", OptionValue::None).contains("option 'nothing' is not known"));
    }
}
