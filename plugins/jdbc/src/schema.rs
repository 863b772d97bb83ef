//! Columns from a record's Kafka Connect schema
//! (`value.converter.schemas.enable=true`, and the key's with
//! `pk.mode=record_key`), as Confluent's JDBC sink takes them: the type
//! `auto.create` and `auto.evolve` declare for a field, `NOT NULL` for a
//! required one (at creation), and each logical value turned into what its
//! column takes.

use base64::Engine as _;
use sluice_sdk::schema::{Logical, MILLIS_PER_DAY, Schema, SchemaKind};

use crate::dialect::Dialect;
use crate::value::SqlValue;

/// The declared type of a column for a field of `schema`.
pub fn sql_type(dialect: Dialect, schema: &Schema, is_key: bool) -> String {
    use Dialect::*;
    if let Some(logical) = schema.logical() {
        return match (dialect, logical) {
            (MySql, Logical::Decimal { scale }) => match precision(schema) {
                Some(p) if p <= 65 && (0..=30).contains(&scale) && scale as u32 <= p => {
                    format!("DECIMAL({p},{scale})")
                }
                _ => format!("DECIMAL(65,{})", scale.clamp(0, 30)),
            },
            (Postgres, Logical::Decimal { scale }) => match precision(schema) {
                Some(p) if p <= 1000 && scale >= 0 && scale as u32 <= p => {
                    format!("NUMERIC({p},{scale})")
                }
                _ => "NUMERIC".into(),
            },
            (Sqlite, Logical::Decimal { .. }) => "NUMERIC".into(),
            (_, Logical::Date) => "DATE".into(),
            (MySql, Logical::Time) => "TIME(3)".into(),
            (_, Logical::Time) => "TIME".into(),
            (MySql, Logical::Timestamp) => "DATETIME(3)".into(),
            // An instant: PostgreSQL keeps it as one.
            (Postgres, Logical::Timestamp) => "TIMESTAMPTZ".into(),
            (Sqlite, Logical::Timestamp) => "TIMESTAMP".into(),
        };
    }
    match (dialect, &schema.kind) {
        (Sqlite, SchemaKind::Int8 | SchemaKind::Int16 | SchemaKind::Int32 | SchemaKind::Int64) => {
            "INTEGER"
        }
        (MySql, SchemaKind::Int8) => "TINYINT",
        (_, SchemaKind::Int8 | SchemaKind::Int16) => "SMALLINT",
        (_, SchemaKind::Int32) => "INT",
        (_, SchemaKind::Int64) => "BIGINT",
        (MySql, SchemaKind::Float32) => "FLOAT",
        (_, SchemaKind::Float32) => "REAL",
        (Postgres, SchemaKind::Float64) => "DOUBLE PRECISION",
        (MySql, SchemaKind::Float64) => "DOUBLE",
        (Sqlite, SchemaKind::Float64) => "REAL",
        (_, SchemaKind::Boolean) => "BOOLEAN",
        (MySql, SchemaKind::String) if is_key => "VARCHAR(255)",
        (Sqlite, SchemaKind::Bytes) => "BLOB",
        (Postgres, SchemaKind::Bytes) => "BYTEA",
        (MySql, SchemaKind::Bytes) if is_key => "VARBINARY(255)",
        (MySql, SchemaKind::Bytes) => "LONGBLOB",
        // Structs, arrays and maps, stored as their JSON.
        (Postgres, SchemaKind::Struct(_) | SchemaKind::Array(_) | SchemaKind::Map(..)) => "JSONB",
        (MySql, SchemaKind::Struct(_) | SchemaKind::Array(_) | SchemaKind::Map(..)) if !is_key => {
            "JSON"
        }
        _ => "TEXT",
    }
    .into()
}

/// A `Decimal`'s precision, where its schema keeps one (Confluent's Avro
/// converter's `connect.decimal.precision`).
fn precision(schema: &Schema) -> Option<u32> {
    schema
        .parameters
        .iter()
        .find(|(k, _)| k == "connect.decimal.precision")
        .and_then(|(_, v)| v.parse::<u32>().ok())
        .filter(|p| *p >= 1)
}

/// A field's value as the sink receives it (see
/// `sluice_sdk::Record::value_schema`), as its column takes it: a `Date`,
/// `Time` or `Timestamp` (milliseconds) as ISO-8601 text in UTC
/// (`2024-01-31`, `13:45:00.250`, `2024-01-31 13:45:00.250`), which every
/// database casts to its column (on PostgreSQL a `Timestamp` says it is
/// UTC, `+00`, so a `TIMESTAMPTZ` holds the instant whatever the session's
/// time zone); `bytes` (base64) as bytes. A `Decimal` stays the exact
/// number it is.
pub fn column_value(dialect: Dialect, schema: &Schema, v: SqlValue) -> Result<SqlValue, String> {
    let SqlValue::Int(ms) = v else {
        return match (&schema.kind, schema.logical(), v) {
            (SchemaKind::Bytes, None, SqlValue::Text(b64)) => {
                base64::engine::general_purpose::STANDARD
                    .decode(&b64)
                    .map(SqlValue::Bytes)
                    .map_err(|e| format!("`bytes` that are not base64: {e}"))
            }
            (_, _, v) => Ok(v),
        };
    };
    let at = || {
        chrono::DateTime::from_timestamp_millis(ms)
            .ok_or_else(|| format!("{ms} ms is out of the range of dates"))
    };
    Ok(match schema.logical() {
        Some(Logical::Date) => {
            if ms % MILLIS_PER_DAY != 0 {
                return Err(format!("a `Date` of {ms} ms is not midnight UTC"));
            }
            SqlValue::Text(at()?.format("%Y-%m-%d").to_string())
        }
        Some(Logical::Time) => SqlValue::Text(at()?.format("%H:%M:%S%.3f").to_string()),
        Some(Logical::Timestamp) => {
            let zone = if dialect == Dialect::Postgres {
                "+00"
            } else {
                ""
            };
            SqlValue::Text(format!("{}{zone}", at()?.format("%Y-%m-%d %H:%M:%S%.3f")))
        }
        _ => SqlValue::Int(ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_follow_confluents_jdbc_sink() {
        for (schema, sqlite, postgres, mysql) in [
            (Schema::int8(), "INTEGER", "SMALLINT", "TINYINT"),
            (Schema::int32(), "INTEGER", "INT", "INT"),
            (Schema::int64(), "INTEGER", "BIGINT", "BIGINT"),
            (Schema::float32(), "REAL", "REAL", "FLOAT"),
            (Schema::float64(), "REAL", "DOUBLE PRECISION", "DOUBLE"),
            (Schema::boolean(), "BOOLEAN", "BOOLEAN", "BOOLEAN"),
            (Schema::string(), "TEXT", "TEXT", "TEXT"),
            (Schema::bytes(), "BLOB", "BYTEA", "LONGBLOB"),
            (Schema::decimal(2), "NUMERIC", "NUMERIC", "DECIMAL(65,2)"),
            (Schema::date(), "DATE", "DATE", "DATE"),
            (Schema::time(), "TIME", "TIME", "TIME(3)"),
            (
                Schema::timestamp(),
                "TIMESTAMP",
                "TIMESTAMPTZ",
                "DATETIME(3)",
            ),
            (Schema::array(Schema::int8()), "TEXT", "JSONB", "JSON"),
            (
                Schema::map(Schema::string(), Schema::int8()),
                "TEXT",
                "JSONB",
                "JSON",
            ),
            (
                Schema::structure([("a", Schema::int8())]),
                "TEXT",
                "JSONB",
                "JSON",
            ),
        ] {
            assert_eq!(sql_type(Dialect::Sqlite, &schema, false), sqlite);
            assert_eq!(sql_type(Dialect::Postgres, &schema, false), postgres);
            assert_eq!(sql_type(Dialect::MySql, &schema, false), mysql);
        }
        assert_eq!(
            sql_type(Dialect::MySql, &Schema::string(), true),
            "VARCHAR(255)"
        );
        // A precision, where the schema has one (Avro's decimals).
        let mut price = Schema::decimal(2);
        price
            .parameters
            .push(("connect.decimal.precision".into(), "20".into()));
        assert_eq!(sql_type(Dialect::Postgres, &price, false), "NUMERIC(20,2)");
        assert_eq!(sql_type(Dialect::MySql, &price, false), "DECIMAL(20,2)");
        assert_eq!(sql_type(Dialect::Sqlite, &price, false), "NUMERIC");
    }

    #[test]
    fn logical_values_become_what_their_columns_take() {
        let v = |s: &Schema, v: SqlValue| column_value(Dialect::Sqlite, s, v).unwrap();
        assert_eq!(
            v(&Schema::date(), SqlValue::Int(19_723 * MILLIS_PER_DAY)),
            SqlValue::Text("2024-01-01".into())
        );
        assert_eq!(
            v(&Schema::time(), SqlValue::Int(49_500_250)),
            SqlValue::Text("13:45:00.250".into())
        );
        assert_eq!(
            v(&Schema::timestamp(), SqlValue::Int(1_704_067_200_123)),
            SqlValue::Text("2024-01-01 00:00:00.123".into())
        );
        // PostgreSQL is told the instant is UTC (a TIMESTAMPTZ column).
        assert_eq!(
            column_value(
                Dialect::Postgres,
                &Schema::timestamp(),
                SqlValue::Int(1_704_067_200_123)
            )
            .unwrap(),
            SqlValue::Text("2024-01-01 00:00:00.123+00".into())
        );
        assert_eq!(
            v(&Schema::bytes(), SqlValue::Text("AAE=".into())),
            SqlValue::Bytes(vec![0, 1])
        );
        assert_eq!(
            v(&Schema::decimal(2), SqlValue::Decimal("1.50".into())),
            SqlValue::Decimal("1.50".into())
        );
        assert_eq!(v(&Schema::date(), SqlValue::Null), SqlValue::Null);
        assert!(column_value(Dialect::Sqlite, &Schema::date(), SqlValue::Int(1)).is_err());
        assert!(
            column_value(
                Dialect::Sqlite,
                &Schema::bytes(),
                SqlValue::Text("*".into())
            )
            .is_err()
        );
    }
}
