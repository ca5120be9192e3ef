//! The closed sets of names an option takes (a value format, a compression, a
//! mode for malformed payloads), each declared once by `named_choices!`.

/// An option's closed set of names: `parse` (any case, with aliases), `as_str` and
/// `NAMES`, the one place each name is spelled.
macro_rules! named_choices {
    ($ty:ident, $option:literal, { $($variant:ident => $name:literal $(| $alias:literal)*),+ $(,)? }) => {
        impl $crate::options::Choice for $ty {
            const NAMES: &'static [&'static str] = &[$($name),+];

            fn parse(name: &str) -> $crate::error::Result<Self> {
                Self::parse(name)
            }
        }

        $crate::choice_option!($ty);

        impl $ty {
            pub const NAMES: &'static [&'static str] = &[$($name),+];

            pub fn parse(name: &str) -> $crate::error::Result<Self> {
                match name.to_ascii_lowercase().as_str() {
                    $($name $(| $alias)* => Ok(Self::$variant),)+
                    _ => Err($crate::error::Error::bad_input(format!(
                        "option '{}' ({name:?}) must be one of {}",
                        $option,
                        Self::NAMES.join(", ")
                    ))),
                }
            }

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)+
                }
            }
        }
    };
}
