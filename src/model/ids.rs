//! Validated task ids and agent names (docs/files.md): `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`, never
//! `..`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::sync::Arc;

/// Why a string is not a valid task id or agent name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The string is empty.
    #[error("is empty")]
    Empty,
    /// The string is longer than 128 bytes.
    #[error("is longer than 128 characters")]
    TooLong,
    /// The string contains `..`.
    #[error("contains '..'")]
    DotDot,
    /// The first character is not a letter or digit.
    #[error("must start with a letter or digit")]
    BadStart,
    /// A character outside `A-Z a-z 0-9 . _ -`.
    #[error("contains {0:?}; only letters, digits, '.', '_' and '-' are allowed")]
    BadChar(char),
}

/// Checks a name against the id rule shared by task ids and agent names.
pub fn check_name(s: &str) -> Result<(), NameError> {
    let first = s.chars().next().ok_or(NameError::Empty)?;
    if s.len() > 128 {
        return Err(NameError::TooLong);
    }
    if !first.is_ascii_alphanumeric() {
        return Err(NameError::BadStart);
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(NameError::BadChar(c));
    }
    if s.contains("..") {
        return Err(NameError::DotDot);
    }
    Ok(())
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        /// Shared text: the planner clones names freely, so a clone is a reference count.
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Validates `s` and wraps it.
            pub fn new(s: &str) -> Result<Self, NameError> {
                check_name(s)?;
                Ok(Self(Arc::from(s)))
            }

            /// Returns the name as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = NameError;
            fn from_str(s: &str) -> Result<Self, NameError> {
                Self::new(s)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({"type": "string"})
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::new(&s).map_err(|e| serde::de::Error::custom(format!("{s:?} {e}")))
            }
        }
    };
}

name_type!(
    /// A task id: the file name's stem, unique across `work/`.
    TaskId
);
name_type!(
    /// An agent name: a profile file's stem or a folder under `work/assigned/`.
    AgentName
);

impl AgentName {
    /// Returns the environment variable holding this agent's signing key: `COORD_KEY_` and
    /// the name upper-cased, with `-` and `.` as `_`.
    pub fn key_var(&self) -> String {
        let name: String = self
            .as_str()
            .chars()
            .map(|c| match c {
                '-' | '.' => '_',
                c => c.to_ascii_uppercase(),
            })
            .collect();
        format!("COORD_KEY_{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_good_names() {
        for s in ["a", "api-spec", "A1.b_c-d", &"x".repeat(128)] {
            assert!(TaskId::new(s).is_ok(), "{s}");
        }
    }

    #[test]
    fn rejects_bad_names() {
        assert_eq!(TaskId::new(""), Err(NameError::Empty));
        assert_eq!(TaskId::new(&"x".repeat(129)), Err(NameError::TooLong));
        assert_eq!(TaskId::new("a..b"), Err(NameError::DotDot));
        assert_eq!(TaskId::new(".hidden"), Err(NameError::BadStart));
        assert_eq!(TaskId::new("../../x"), Err(NameError::BadStart));
        assert_eq!(TaskId::new("a/b"), Err(NameError::BadChar('/')));
        assert_eq!(TaskId::new("a\0b"), Err(NameError::BadChar('\0')));
        assert_eq!(AgentName::new("al ice"), Err(NameError::BadChar(' ')));
    }

    #[test]
    fn deserializes_with_validation() {
        let ok: Result<AgentName, _> = serde_json::from_str("\"alice\"");
        assert!(ok.is_ok());
        let bad: Result<AgentName, _> = serde_json::from_str("\"../x\"");
        assert!(bad.is_err());
    }
}
