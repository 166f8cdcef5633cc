//! Options whose value is one of a few names (`mode = "full"`, `on_error = "skip"`): each enum
//! lists its names once ([`Choice::VALUES`]), and parsing, printing, error messages and the
//! lists shown to users (the bindings, the CLI's choices, the docs) all come from that list.

use crate::error::{LogError, Result};

/// An enum chosen by name.
pub trait Choice: Copy + PartialEq + Sized + 'static {
    /// The option's name in messages (`mode`).
    const OPTION: &'static str;
    /// Every value with its name, in the order shown to users.
    const VALUES: &'static [(&'static str, Self)];

    /// The value's name.
    fn name(self) -> &'static str {
        Self::VALUES.iter().find(|(_, v)| *v == self).map_or("?", |(n, _)| n)
    }

    /// The names, in order.
    fn names() -> Vec<&'static str> {
        Self::VALUES.iter().map(|(n, _)| *n).collect()
    }

    /// The value named `s` (exactly), or an error listing the names.
    fn parse(s: &str) -> Result<Self> {
        Self::VALUES.iter().find(|(n, _)| *n == s).map(|(_, v)| *v).ok_or_else(|| {
            let names: Vec<String> = Self::VALUES.iter().map(|(n, _)| format!("'{n}'")).collect();
            LogError::InvalidArgument {
                msg: format!("{} must be one of {}, not '{s}'", Self::OPTION, names.join(", ")),
            }
        })
    }
}

/// What an option's value is, as listed to users (the bindings, the CLI, the docs).
pub trait OptionValue {
    /// `bool`, `int`, `string`, `choice`, `list`, ...
    const KIND: &'static str;
    /// The value as JSON (a default shown to users).
    fn to_json(&self) -> serde_json::Value;
    /// The names a choice takes; empty for other kinds.
    fn choices() -> Vec<&'static str> {
        Vec::new()
    }
}

/// Plain values, shown as themselves.
macro_rules! plain_values {
    ($($ty:ty => $kind:literal),* $(,)?) => {$(
        impl OptionValue for $ty {
            const KIND: &'static str = $kind;
            fn to_json(&self) -> serde_json::Value {
                self.clone().into()
            }
        }
    )*};
}
plain_values!(bool => "bool", usize => "int", u64 => "int", String => "string");

impl<T: OptionValue> OptionValue for Option<T> {
    const KIND: &'static str = T::KIND;
    fn to_json(&self) -> serde_json::Value {
        self.as_ref().map_or(serde_json::Value::Null, T::to_json)
    }
    fn choices() -> Vec<&'static str> {
        T::choices()
    }
}

impl<T: OptionValue> OptionValue for Vec<T> {
    const KIND: &'static str = "list";
    fn to_json(&self) -> serde_json::Value {
        self.iter().map(T::to_json).collect()
    }
    fn choices() -> Vec<&'static str> {
        T::choices()
    }
}

/// Implements [`Choice`] (and `FromStr` through it) for an enum:
/// `choices!(ImageMode, "mode", { "id" => ImageMode::Id, ... });`
#[macro_export]
macro_rules! choices {
    ($ty:ty, $option:literal, { $($name:literal => $value:expr),+ $(,)? }) => {
        impl $crate::choice::Choice for $ty {
            const OPTION: &'static str = $option;
            const VALUES: &'static [(&'static str, Self)] = &[$(($name, $value)),+];
        }

        impl $crate::choice::OptionValue for $ty {
            const KIND: &'static str = "choice";
            fn to_json(&self) -> serde_json::Value {
                <$ty as $crate::choice::Choice>::name(*self).into()
            }
            fn choices() -> Vec<&'static str> {
                <$ty as $crate::choice::Choice>::names()
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::error::LogError;
            fn from_str(s: &str) -> $crate::error::Result<Self> {
                <$ty as $crate::choice::Choice>::parse(s)
            }
        }
    };
}
