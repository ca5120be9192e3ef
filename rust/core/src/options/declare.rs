//! The declaration of an options struct: [`declare_options!`] writes, from one line
//! per option (name, Rust type, default, bounds, doc), the struct, its `Default`,
//! its table ([`crate::options::Declared::TABLE`]) and its setter from a value of any
//! kind, which checks the option's kind, bounds and choices and names it. What
//! depends on two options at once stays hand written beside the declaration (each
//! struct's `validate`).

/// Declares an options struct.
///
/// ```ignore
/// declare_options! {
///     /// How a publisher sends.
///     #[derive(Debug, Clone)]
///     pub struct PublishOptions (none_is_default) {
///         /// Unacknowledged messages in flight at most.
///         window: usize = defaults::WINDOW, min 1, max MAX_WINDOW;
///         /// Every row goes to this subject.
///         subject: Option<String>;
///     }
///     extra {
///         /// Not an option callers give: set by the call.
///         values: Option<CodecSpec> = None;
///     }
/// }
/// ```
///
/// Each option has exactly one doc line (the table's). The default is a value as a
/// caller would give it (a count, a `Duration`, a `&str` of a choice), read through the
/// same checks as one given, so a default out of bounds fails every test at once; an
/// option without one is None (an `Option` or a list). `min`/`max` narrow the type's
/// bounds; a duration with `min` above zero must be more than nothing. With
/// `none_is_default`, None given for an option that is not an `Option` means its
/// default (the Python dataclasses' None); without, it is refused. The `extra` fields
/// are the struct's but no option: they are set by the call, not given by name.
#[macro_export]
macro_rules! declare_options {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident ($($none_is_default:ident)?) {
            $(
                #[doc = $doc:literal]
                $field:ident : $ty:ty $(= $default:expr)? $(, min $min:expr)? $(, max $max:expr)? ;
            )*
        }
        $(extra {
            $(
                $(#[$xmeta:meta])*
                $xfield:ident : $xty:ty = $xdefault:expr ;
            )*
        })?
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( #[doc = $doc] pub $field: $ty, )*
            $($( $(#[$xmeta])* pub $xfield: $xty, )*)?
        }

        impl $name {
            /// Whether None given for an option that is not an `Option` means its default.
            const NONE_IS_DEFAULT: bool = false $(|| $crate::declare_options!(@flag $none_is_default))?;
        }

        impl $crate::options::Declared for $name {
            const TABLE: &'static [$crate::options::OptionDecl] = &[
                $( $crate::options::OptionDecl {
                    name: stringify!($field),
                    kind: <$ty as $crate::options::OptionType>::KIND,
                    default: || $crate::declare_options!(@or
                        [$crate::options::OptionValue::None]
                        $($crate::options::OptionValue::from($default))?
                    ),
                    minimum: || $crate::declare_options!(@or
                        [<$ty as $crate::options::OptionType>::natural_minimum()]
                        $(Some($crate::options::IntoLimit::into_limit($min)))?
                    ),
                    maximum: || $crate::declare_options!(@or
                        [<$ty as $crate::options::OptionType>::natural_maximum()]
                        $(Some($crate::options::IntoLimit::into_limit($max)))?
                    ),
                    choices: <$ty as $crate::options::OptionType>::CHOICES,
                    nullable: <$ty as $crate::options::OptionType>::OPTIONAL
                        || $name::NONE_IS_DEFAULT,
                    doc: $doc,
                }, )*
            ];

            fn set(
                &mut self,
                name: &str,
                value: $crate::options::OptionValue,
            ) -> $crate::error::Result<()> {
                let decl = <Self as $crate::options::Declared>::decl(name)?;
                match name {
                    $( stringify!($field) => {
                        // None for an option that is not an `Option`: its default, where
                        // None means that, else refused by the type as any wrong kind.
                        // None for an `Option` is None itself, whatever its default
                        // (`max_reconnects=None`: reconnect forever).
                        let value = if value == $crate::options::OptionValue::None
                            && decl.nullable
                            && !<$ty as $crate::options::OptionType>::OPTIONAL
                        {
                            (decl.default)()
                        } else {
                            value
                        };
                        self.$field =
                            <$ty as $crate::options::OptionType>::from_option(value, decl)?;
                    } )*
                    _ => unreachable!("decl() knows every declared name"),
                }
                Ok(())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self {
                    $( $field: {
                        let decl = <Self as $crate::options::Declared>::decl(stringify!($field))
                            .expect("a declared option");
                        <$ty as $crate::options::OptionType>::from_option((decl.default)(), decl)
                            .expect("a declared default is a valid value")
                    }, )*
                    $($( $xfield: $xdefault, )*)?
                }
            }
        }
    };
    (@flag none_is_default) => { true };
    // What a declaration gives, else the fallback.
    (@or [$fallback:expr]) => { $fallback };
    (@or [$fallback:expr] $given:expr) => { $given };
}
