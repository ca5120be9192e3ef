//! Every native option, declared once: each options struct of the core (connecting,
//! publishing, reading, consuming, and each value format's settings) is written by
//! [`declare_options!`] from one line per option, which makes its table
//! ([`Declared::TABLE`], exported to Python as `_core.OPTION_TABLES`) and its setter
//! from a value of any kind ([`Declared::set`]). The bindings read every options
//! object one way: by walking the table.
//!
//! - `table.rs`: what a declared option is ([`OptionDecl`], [`Kind`], [`Limit`]);
//! - `declare.rs`: the declaration macro;
//! - `values.rs`: option values as callers give them, checked and converted into a
//!   field's Rust type ([`OptionValue`], [`OptionType`]), naming the option.

pub mod declare;
pub mod table;
pub mod values;

pub use table::{IntoLimit, Kind, Limit, OptionDecl};
pub use values::{Choice, OptionType, OptionValue};

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
            .ok_or_else(|| Error::bad_input(format!("option '{name}' is not known")))
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
