//! Kafka Connect's schemas (`org.apache.kafka.connect.data.Schema`): the
//! type a record's key or value carries when its converter is Kafka
//! Connect's `JsonConverter` with `schemas.enable=true`.
//!
//! A schema travels with the record ([`Record::key_schema`],
//! [`Record::value_schema`]); the bytes beside it are then the *payload*,
//! as JSON, in the form a sink receives (described on
//! [`Record::value_schema`]). The runtime reads and writes the
//! `{"schema": ..., "payload": ...}` envelope (`runtime/src/schema/`);
//! this module is only the type, shared with connectors.
//!
//! [`Record::key_schema`]: crate::Record::key_schema
//! [`Record::value_schema`]: crate::Record::value_schema

/// `org.apache.kafka.connect.data.Decimal`: `bytes`, parameter `scale`.
pub const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
/// `org.apache.kafka.connect.data.Date`: `int32`, days since the epoch.
pub const DATE: &str = "org.apache.kafka.connect.data.Date";
/// `org.apache.kafka.connect.data.Time`: `int32`, milliseconds since midnight.
pub const TIME: &str = "org.apache.kafka.connect.data.Time";
/// `org.apache.kafka.connect.data.Timestamp`: `int64`, milliseconds since the epoch.
pub const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
/// The parameter of a `Decimal` that holds its scale.
pub const DECIMAL_SCALE: &str = "scale";

/// Milliseconds in a day: a `Date` is a whole number of them.
pub const MILLIS_PER_DAY: i64 = 86_400_000;

/// One Kafka Connect schema.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Schema {
    pub kind: SchemaKind,
    /// Whether the value may be null.
    pub optional: bool,
    /// E.g. a logical type's name ([`DECIMAL`], ...) or a record's name.
    pub name: Option<String>,
    pub version: Option<i32>,
    pub doc: Option<String>,
    /// In their order. An empty list is the same as none (Kafka Connect
    /// writes no `parameters` then).
    pub parameters: Vec<(String, String)>,
    /// The default value, as the JSON text `JsonConverter` writes for it
    /// (its envelope form: a `Decimal` as base64, a `Date` in days).
    pub default: Option<String>,
}

/// A schema's type; the names are `JsonConverter`'s (`float` and `double`
/// for `float32` and `float64`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SchemaKind {
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Boolean,
    String,
    Bytes,
    Array(Box<Schema>),
    /// Keys, values.
    Map(Box<Schema>, Box<Schema>),
    Struct(Vec<Field>),
}

/// A field of a struct.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Field {
    pub name: String,
    pub schema: Schema,
}

/// Kafka Connect's logical types, recognised by name on their underlying type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logical {
    /// Exact decimal with this many digits after the point.
    Decimal {
        scale: i32,
    },
    Date,
    Time,
    Timestamp,
}

impl SchemaKind {
    /// `JsonConverter`'s name of the type (`"type"` in the envelope).
    pub fn type_name(&self) -> &'static str {
        match self {
            SchemaKind::Int8 => "int8",
            SchemaKind::Int16 => "int16",
            SchemaKind::Int32 => "int32",
            SchemaKind::Int64 => "int64",
            SchemaKind::Float32 => "float",
            SchemaKind::Float64 => "double",
            SchemaKind::Boolean => "boolean",
            SchemaKind::String => "string",
            SchemaKind::Bytes => "bytes",
            SchemaKind::Array(_) => "array",
            SchemaKind::Map(..) => "map",
            SchemaKind::Struct(_) => "struct",
        }
    }
}

impl Schema {
    /// A required schema of this kind, with nothing else set.
    pub fn new(kind: SchemaKind) -> Self {
        Schema {
            kind,
            optional: false,
            name: None,
            version: None,
            doc: None,
            parameters: Vec::new(),
            default: None,
        }
    }

    pub fn int8() -> Self {
        Self::new(SchemaKind::Int8)
    }
    pub fn int16() -> Self {
        Self::new(SchemaKind::Int16)
    }
    pub fn int32() -> Self {
        Self::new(SchemaKind::Int32)
    }
    pub fn int64() -> Self {
        Self::new(SchemaKind::Int64)
    }
    pub fn float32() -> Self {
        Self::new(SchemaKind::Float32)
    }
    pub fn float64() -> Self {
        Self::new(SchemaKind::Float64)
    }
    pub fn boolean() -> Self {
        Self::new(SchemaKind::Boolean)
    }
    pub fn string() -> Self {
        Self::new(SchemaKind::String)
    }
    pub fn bytes() -> Self {
        Self::new(SchemaKind::Bytes)
    }
    pub fn array(items: Schema) -> Self {
        Self::new(SchemaKind::Array(Box::new(items)))
    }
    pub fn map(keys: Schema, values: Schema) -> Self {
        Self::new(SchemaKind::Map(Box::new(keys), Box::new(values)))
    }
    /// A struct of these fields, in this order.
    pub fn structure<N: Into<String>>(fields: impl IntoIterator<Item = (N, Schema)>) -> Self {
        Self::new(SchemaKind::Struct(
            fields
                .into_iter()
                .map(|(name, schema)| Field {
                    name: name.into(),
                    schema,
                })
                .collect(),
        ))
    }

    /// `Decimal` with this scale (Kafka Connect's `Decimal.schema(scale)`).
    pub fn decimal(scale: i32) -> Self {
        let mut s = Self::bytes().named(DECIMAL).version(1);
        s.parameters
            .push((DECIMAL_SCALE.to_string(), scale.to_string()));
        s
    }
    /// `Date` (Kafka Connect's `Date.SCHEMA`).
    pub fn date() -> Self {
        Self::int32().named(DATE).version(1)
    }
    /// `Time` (Kafka Connect's `Time.SCHEMA`).
    pub fn time() -> Self {
        Self::int32().named(TIME).version(1)
    }
    /// `Timestamp` (Kafka Connect's `Timestamp.SCHEMA`).
    pub fn timestamp() -> Self {
        Self::int64().named(TIMESTAMP).version(1)
    }

    /// The same schema, optional.
    pub fn optional(mut self) -> Self {
        self.optional = true;
        self
    }
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    pub fn version(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }

    /// A struct's field by name.
    pub fn field(&self, name: &str) -> Option<&Schema> {
        match &self.kind {
            SchemaKind::Struct(fields) => fields.iter().find(|f| f.name == name).map(|f| &f.schema),
            _ => None,
        }
    }

    /// A parameter's value.
    pub fn parameter(&self, key: &str) -> Option<&str> {
        self.parameters
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The logical type this schema is, if its name is one of Kafka
    /// Connect's on the right underlying type (a `Decimal` needs an integer
    /// `scale`).
    pub fn logical(&self) -> Option<Logical> {
        match (self.name.as_deref()?, &self.kind) {
            (DECIMAL, SchemaKind::Bytes) => Some(Logical::Decimal {
                scale: self.parameter(DECIMAL_SCALE)?.parse().ok()?,
            }),
            (DATE, SchemaKind::Int32) => Some(Logical::Date),
            (TIME, SchemaKind::Int32) => Some(Logical::Time),
            (TIMESTAMP, SchemaKind::Int64) => Some(Logical::Timestamp),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logical_types_are_known_by_name_on_their_type() {
        assert_eq!(
            Schema::decimal(2).logical(),
            Some(Logical::Decimal { scale: 2 })
        );
        assert_eq!(Schema::date().logical(), Some(Logical::Date));
        assert_eq!(Schema::time().logical(), Some(Logical::Time));
        assert_eq!(Schema::timestamp().logical(), Some(Logical::Timestamp));
        assert_eq!(Schema::int64().named(DATE).logical(), None);
        assert_eq!(Schema::bytes().named(DECIMAL).logical(), None);
        let s = Schema::structure([("a", Schema::int32()), ("b", Schema::string().optional())]);
        assert_eq!(s.field("b"), Some(&Schema::string().optional()));
        assert_eq!(s.field("c"), None);
        assert_eq!(s.kind.type_name(), "struct");
        assert_eq!(Schema::float64().kind.type_name(), "double");
    }
}
