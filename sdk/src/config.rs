//! Kafka Connect configs are flat maps of strings. A plugin declares its keys
//! as a typed struct (`#[serde(deny_unknown_fields)]`, with `rename` for the
//! dotted names) and [`from_string_map`] parses each string as the field's
//! type, so a wrong or unsupported key is an error naming that key.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};

/// A connector or transform config: every value a string, as in Kafka Connect.
pub type ConfigMap = BTreeMap<String, String>;

/// A config that cannot be used, naming the key at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub key: Option<String>,
    pub message: String,
}

impl ConfigError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: Some(key.into()),
            message: message.into(),
        }
    }

    pub fn general(message: impl Into<String>) -> Self {
        Self {
            key: None,
            message: message.into(),
        }
    }

    fn with_key(mut self, key: &str) -> Self {
        if self.key.is_none() {
            self.key = Some(key.to_string());
        }
        self
    }

    /// Prefixes the key, for keys that were parsed out of a namespace
    /// (`transforms.a.` + `field`).
    pub fn in_namespace(mut self, prefix: &str) -> Self {
        if let Some(k) = &self.key {
            self.key = Some(format!("{prefix}{k}"));
        }
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(k) => write!(f, "key `{k}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

impl de::Error for ConfigError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        ConfigError::general(msg.to_string())
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        let mut known: Vec<&str> = expected.to_vec();
        known.sort_unstable();
        ConfigError::new(
            field,
            format!(
                "not supported by this plugin; supported keys are: {}",
                known.join(", ")
            ),
        )
    }

    fn missing_field(field: &'static str) -> Self {
        ConfigError::new(field, "is required but missing")
    }
}

/// Deserialises a string map into `T`, parsing each value as its field's type:
/// numbers, booleans (`true`/`false`), enums by name, comma-separated lists.
pub fn from_string_map<T: DeserializeOwned>(map: &ConfigMap) -> Result<T, ConfigError> {
    let entries = map.iter().map(|(k, v)| {
        (
            k.as_str().into_deserializer(),
            StrValue {
                key: k.as_str(),
                value: v.as_str(),
            },
        )
    });
    let de = de::value::MapDeserializer::<_, ConfigError>::new(entries);
    T::deserialize(de)
}

/// Keys that start with `prefix`, with the prefix removed.
pub fn subset(map: &ConfigMap, prefix: &str) -> ConfigMap {
    map.iter()
        .filter_map(|(k, v)| {
            k.strip_prefix(prefix)
                .map(|rest| (rest.to_string(), v.clone()))
        })
        .collect()
}

struct StrValue<'a> {
    key: &'a str,
    value: &'a str,
}

impl StrValue<'_> {
    fn parse<T: std::str::FromStr>(&self, what: &str) -> Result<T, ConfigError> {
        self.value.trim().parse().map_err(|_| {
            ConfigError::new(self.key, format!("expected {what}, got `{}`", self.value))
        })
    }
}

impl<'de> IntoDeserializer<'de, ConfigError> for StrValue<'de> {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

macro_rules! parse_number {
    ($($method:ident => $ty:ty, $visit:ident, $what:literal;)*) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
            let n: $ty = self.parse($what)?;
            visitor.$visit(n).map_err(|e: ConfigError| e.with_key(self.key))
        })*
    };
}

impl<'de> de::Deserializer<'de> for StrValue<'de> {
    type Error = ConfigError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        visitor
            .visit_borrowed_str(self.value)
            .map_err(|e: ConfigError| e.with_key(self.key))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        let b = match self.value.trim().to_ascii_lowercase().as_str() {
            "true" => true,
            "false" => false,
            _ => {
                return Err(ConfigError::new(
                    self.key,
                    format!("expected `true` or `false`, got `{}`", self.value),
                ));
            }
        };
        visitor
            .visit_bool(b)
            .map_err(|e: ConfigError| e.with_key(self.key))
    }

    parse_number! {
        deserialize_i8 => i8, visit_i8, "an integer";
        deserialize_i16 => i16, visit_i16, "an integer";
        deserialize_i32 => i32, visit_i32, "an integer";
        deserialize_i64 => i64, visit_i64, "an integer";
        deserialize_u8 => u8, visit_u8, "a non-negative integer";
        deserialize_u16 => u16, visit_u16, "a non-negative integer";
        deserialize_u32 => u32, visit_u32, "a non-negative integer";
        deserialize_u64 => u64, visit_u64, "a non-negative integer";
        deserialize_f32 => f32, visit_f32, "a number";
        deserialize_f64 => f64, visit_f64, "a number";
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        visitor.visit_some(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        let key = self.key;
        let items = self
            .value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| StrValue { key, value: s });
        visitor
            .visit_seq(de::value::SeqDeserializer::new(items))
            .map_err(|e: ConfigError| e.with_key(key))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ConfigError> {
        let key = self.key;
        visitor
            .visit_enum(self.value.trim().into_deserializer())
            .map_err(|e: ConfigError| e.with_key(key))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ConfigError> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        char str string bytes byte_buf unit unit_struct tuple
        tuple_struct map struct identifier ignored_any i128 u128
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        Insert,
        Upsert,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Example {
        #[serde(rename = "batch.size", default)]
        batch_size: Option<u32>,
        #[serde(rename = "insert.mode")]
        mode: Mode,
        #[serde(rename = "pk.fields", default)]
        pk_fields: Vec<String>,
        #[serde(rename = "auto.create", default)]
        auto_create: bool,
        #[serde(default)]
        ratio: f64,
    }

    fn map(pairs: &[(&str, &str)]) -> ConfigMap {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_typed_values() {
        let cfg: Example = from_string_map(&map(&[
            ("batch.size", "500"),
            ("insert.mode", "upsert"),
            ("pk.fields", "a, b,c"),
            ("auto.create", "TRUE"),
            ("ratio", "0.25"),
        ]))
        .unwrap();
        assert_eq!(
            cfg,
            Example {
                batch_size: Some(500),
                mode: Mode::Upsert,
                pk_fields: vec!["a".into(), "b".into(), "c".into()],
                auto_create: true,
                ratio: 0.25,
            }
        );
    }

    #[test]
    fn errors_name_the_key() {
        let err =
            from_string_map::<Example>(&map(&[("batch.size", "many"), ("insert.mode", "insert")]))
                .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("batch.size"));
        assert!(
            err.message.contains("expected a non-negative integer"),
            "{err}"
        );

        let err = from_string_map::<Example>(&map(&[("insert.mode", "merge")])).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("insert.mode"));
        assert!(err.message.contains("merge"), "{err}");

        let err = from_string_map::<Example>(&map(&[])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "key `insert.mode`: is required but missing"
        );

        let err = from_string_map::<Example>(&map(&[("insert.mode", "insert"), ("colour", "red")]))
            .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("colour"));
        assert!(err.message.contains("supported keys are"), "{err}");
    }
}
