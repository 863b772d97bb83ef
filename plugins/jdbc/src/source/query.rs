//! What `jdbc-source` asks the database: its tables, their columns, the
//! time, and each poll's query, read in the background so a poll takes
//! `batch.max.rows` at a time from a result of any size.

use futures::StreamExt as _;
use sluice_sdk::ConnectError;
use sqlx::{Column as _, Row as _, TypeInfo as _, Value as _, ValueRef as _};
use tokio::sync::mpsc;

use super::columns::{Cell, ColumnFacts};
use super::config::{Mode, QuoteIdentifiers};
use crate::db::{Pool, classify};
use crate::dialect::Dialect;

/// A table as `jdbc-source` names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TableId {
    /// The database (PostgreSQL, MySQL); none in SQLite.
    pub catalog: Option<String>,
    /// The schema (PostgreSQL).
    pub schema: Option<String>,
    pub table: String,
}

impl TableId {
    /// `catalog.schema.table` without quotes: Confluent's offsets key a
    /// table by this (offset protocol 1).
    pub fn fqn(&self) -> String {
        [&self.catalog, &self.schema, &Some(self.table.clone())]
            .into_iter()
            .flatten()
            .cloned()
            .collect::<Vec<_>>()
            .join(".")
    }

    /// Whether a `table.whitelist` entry names this table: `table`,
    /// `schema.table` or `catalog.schema.table`.
    pub fn named_by(&self, entry: &str) -> bool {
        let entry = entry.trim();
        entry == self.table
            || self
                .schema
                .as_ref()
                .is_some_and(|s| entry == format!("{s}.{}", self.table))
            || (self.catalog.is_some() && entry == self.fqn())
            || (self.catalog.is_some()
                && self.schema.is_none()
                && entry == format!("{}.{}", self.catalog.as_deref().unwrap_or(""), self.table))
    }
}

pub fn quote(dialect: Dialect, how: QuoteIdentifiers, ident: &str) -> String {
    match (how, dialect) {
        (QuoteIdentifiers::Never, _) => ident.to_string(),
        (_, Dialect::MySql) => format!("`{}`", ident.replace('`', "``")),
        _ => format!("\"{}\"", ident.replace('"', "\"\"")),
    }
}

fn db_error(what: &str) -> impl FnOnce(sqlx::Error) -> ConnectError + '_ {
    move |e| classify(what.to_string(), e)
}

/// The current database's name (none for SQLite).
pub async fn catalog(pool: &Pool) -> Result<Option<String>, ConnectError> {
    let sql = match pool.dialect() {
        Dialect::Sqlite => return Ok(None),
        Dialect::Postgres => "SELECT current_database()::text",
        Dialect::MySql => "SELECT DATABASE()",
    };
    text_scalar(pool, sql).await
}

/// The database's time now, in UTC.
pub async fn now(pool: &Pool) -> Result<chrono::NaiveDateTime, ConnectError> {
    let sql = match pool.dialect() {
        Dialect::Postgres => "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')",
        Dialect::MySql => "SELECT DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f')",
        Dialect::Sqlite => "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')",
    };
    let text = text_scalar(pool, sql)
        .await?
        .ok_or_else(|| ConnectError::fatal("the database did not say what time it is"))?;
    super::columns::parse_timestamp(&Cell::Text(text)).map_err(ConnectError::fatal)
}

async fn text_scalar(pool: &Pool, sql: &str) -> Result<Option<String>, ConnectError> {
    let what = "asking the database";
    match pool {
        Pool::Postgres(p, _) => sqlx::query_scalar(sql).fetch_one(p).await,
        Pool::MySql(p) => sqlx::query_scalar(sql).fetch_one(p).await,
        Pool::Sqlite(p) => sqlx::query_scalar(sql).fetch_one(p).await,
    }
    .map_err(db_error(what))
}

/// The tables (and views, with `table.types`) the connection sees,
/// outside the system schemas.
pub async fn tables(
    pool: &Pool,
    types: &[String],
    schema_pattern: Option<&str>,
) -> Result<Vec<TableId>, ConnectError> {
    let views = types.iter().any(|t| t == "VIEW");
    let base = types.iter().any(|t| t == "TABLE");
    let what = "listing the database's tables";
    let catalog = catalog(pool).await?;
    let mut found: Vec<TableId> = match pool {
        Pool::Postgres(p, _) => {
            let rows: Vec<(String, String, String)> = sqlx::query_as(
                "SELECT table_schema::text, table_name::text, table_type::text
                 FROM information_schema.tables
                 WHERE table_schema NOT IN ('pg_catalog', 'information_schema')
                   AND table_schema NOT LIKE 'pg_toast%'
                   AND ($1::text IS NULL OR table_schema LIKE $1)",
            )
            .bind(schema_pattern)
            .fetch_all(p)
            .await
            .map_err(db_error(what))?;
            rows.into_iter()
                .filter(|(_, _, ty)| (base && ty == "BASE TABLE") || (views && ty == "VIEW"))
                .map(|(schema, table, _)| TableId {
                    catalog: catalog.clone(),
                    schema: Some(schema),
                    table,
                })
                .collect()
        }
        Pool::MySql(p) => {
            let rows: Vec<(String, String)> = sqlx::query_as(
                "SELECT CAST(table_name AS CHAR), CAST(table_type AS CHAR)
                 FROM information_schema.tables WHERE table_schema = DATABASE()",
            )
            .fetch_all(p)
            .await
            .map_err(db_error(what))?;
            rows.into_iter()
                .filter(|(_, ty)| (base && ty == "BASE TABLE") || (views && ty == "VIEW"))
                .map(|(table, _)| TableId {
                    catalog: catalog.clone(),
                    schema: None,
                    table,
                })
                .collect()
        }
        Pool::Sqlite(p) => {
            let rows: Vec<(String, String)> = sqlx::query_as(
                "SELECT name, type FROM sqlite_master
                 WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'",
            )
            .fetch_all(p)
            .await
            .map_err(db_error(what))?;
            rows.into_iter()
                .filter(|(_, ty)| (base && ty == "table") || (views && ty == "view"))
                .map(|(table, _)| TableId {
                    catalog: None,
                    schema: None,
                    table,
                })
                .collect()
        }
    };
    found.sort();
    Ok(found)
}

/// Nullability, precision, scale and generation of a table's columns.
pub async fn column_facts(
    pool: &Pool,
    table: &TableId,
) -> Result<Vec<(String, ColumnFacts)>, ConnectError> {
    let what = format!("reading the columns of `{}`", table.fqn());
    type Row = (
        String,
        String,
        Option<i64>,
        Option<i64>,
        Option<String>,
        String,
    );
    let rows: Vec<Row> = match pool {
        Pool::Postgres(p, _) => sqlx::query_as(
            "SELECT column_name::text, is_nullable::text, numeric_precision::int8,
                    numeric_scale::int8, column_default::text, is_identity::text
             FROM information_schema.columns
             WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
        )
        .bind(table.schema.as_deref().unwrap_or("public"))
        .bind(&table.table)
        .fetch_all(p)
        .await
        .map_err(|e| classify(what.clone(), e))?,
        Pool::MySql(p) => sqlx::query_as(
            "SELECT CAST(column_name AS CHAR), CAST(is_nullable AS CHAR),
                    CAST(numeric_precision AS SIGNED), CAST(numeric_scale AS SIGNED),
                    CAST(column_default AS CHAR), CAST(extra AS CHAR)
             FROM information_schema.columns
             WHERE table_schema = DATABASE() AND table_name = ? ORDER BY ordinal_position",
        )
        .bind(&table.table)
        .fetch_all(p)
        .await
        .map_err(|e| classify(what.clone(), e))?,
        Pool::Sqlite(p) => {
            let rows: Vec<(String, String, i64, i64)> =
                sqlx::query_as("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?)")
                    .bind(&table.table)
                    .fetch_all(p)
                    .await
                    .map_err(|e| classify(what.clone(), e))?;
            let single_pk = rows.iter().filter(|r| r.3 > 0).count() == 1;
            rows.into_iter()
                .map(|(name, ty, notnull, pk)| {
                    // INTEGER PRIMARY KEY is the rowid: generated.
                    let rowid = single_pk && pk > 0 && ty.eq_ignore_ascii_case("INTEGER");
                    (
                        name,
                        if notnull != 0 || rowid { "NO" } else { "YES" }.to_string(),
                        None,
                        None,
                        None,
                        if rowid { "YES" } else { "NO" }.to_string(),
                    )
                })
                .collect()
        }
    };
    if rows.is_empty() {
        return Err(ConnectError::fatal(format!(
            "table `{}` does not exist or has no columns this user can see",
            table.fqn()
        )));
    }
    Ok(rows
        .into_iter()
        .map(|(name, nullable, precision, scale, default, generated)| {
            let generated = generated.eq_ignore_ascii_case("YES")
                || generated.contains("auto_increment")
                || default
                    .as_deref()
                    .is_some_and(|d| d.starts_with("nextval("));
            (
                name,
                ColumnFacts {
                    nullable: nullable.eq_ignore_ascii_case("YES"),
                    precision,
                    scale,
                    generated,
                },
            )
        })
        .collect())
}

/// Where a table's (or the query's) reading stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Position {
    pub incrementing: Option<i64>,
    /// UTC.
    pub timestamp: Option<chrono::NaiveDateTime>,
}

impl Position {
    /// Confluent's offset: `incrementing`, `timestamp` (milliseconds) and
    /// `timestamp_nanos` (the nanoseconds within its second).
    pub fn to_offset(self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        if let Some(i) = self.incrementing {
            map.insert("incrementing".into(), i.into());
        }
        if let Some(ts) = self.timestamp {
            use chrono::Timelike as _;
            map.insert("timestamp".into(), ts.and_utc().timestamp_millis().into());
            map.insert("timestamp_nanos".into(), i64::from(ts.nanosecond()).into());
        }
        serde_json::Value::Object(map)
    }

    pub fn from_offset(offset: &serde_json::Value) -> Position {
        let incrementing = offset
            .get("incrementing")
            .and_then(serde_json::Value::as_i64);
        let timestamp = offset
            .get("timestamp")
            .and_then(serde_json::Value::as_i64)
            .and_then(|ms| {
                let nanos = offset
                    .get("timestamp_nanos")
                    .and_then(serde_json::Value::as_i64)
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or_else(|| (ms.rem_euclid(1000) as u32) * 1_000_000);
                chrono::DateTime::from_timestamp(ms.div_euclid(1000), nanos)
            })
            .map(|d| d.naive_utc());
        Position {
            incrementing,
            timestamp,
        }
    }
}

/// Builds each poll's statement for one table or the query.
#[derive(Debug, Clone)]
pub struct Statement {
    pub dialect: Dialect,
    pub mode: Mode,
    /// `SELECT * FROM t`, or the user's query as a subquery.
    pub from: String,
    pub incrementing: Option<String>,
    /// The timestamp expression (`COALESCE` of several columns).
    pub timestamp: Option<String>,
    pub suffix: Option<String>,
}

impl Statement {
    /// The SQL for rows after `after`, up to `until` (timestamp modes).
    /// Values are written as literals from typed numbers and times, never
    /// from text a user gave, so the statement can run without binds (the
    /// text protocol, which returns every type as text).
    pub fn sql(&self, after: Position, until: Option<chrono::NaiveDateTime>) -> String {
        let literal = |ts: chrono::NaiveDateTime| match self.dialect {
            // strftime's form, which `ts` is normalised to below.
            Dialect::Sqlite => format!("'{}'", ts.format("%Y-%m-%d %H:%M:%S%.3f")),
            _ => format!("'{}'", ts.format("%Y-%m-%d %H:%M:%S%.6f")),
        };
        let ts = self.timestamp.as_ref().map(|t| match self.dialect {
            Dialect::Sqlite => format!("strftime('%Y-%m-%d %H:%M:%f', {t})"),
            _ => t.clone(),
        });
        let inc = self.incrementing.as_deref().unwrap_or("");
        let epoch = chrono::DateTime::UNIX_EPOCH.naive_utc();
        let mut sql = self.from.clone();
        let last_inc = after.incrementing.unwrap_or(-1);
        match (self.mode, ts) {
            (Mode::Incrementing, _) => {
                sql.push_str(&format!(" WHERE {inc} > {last_inc} ORDER BY {inc} ASC"));
            }
            (Mode::Timestamp, Some(ts)) => {
                let last = literal(after.timestamp.unwrap_or(epoch));
                let end = literal(until.unwrap_or(epoch));
                sql.push_str(&format!(
                    " WHERE {ts} > {last} AND {ts} < {end} ORDER BY {ts} ASC"
                ));
            }
            (Mode::TimestampIncrementing, Some(ts)) => {
                let last = literal(after.timestamp.unwrap_or(epoch));
                let end = literal(until.unwrap_or(epoch));
                sql.push_str(&format!(
                    " WHERE {ts} < {end} AND (({ts} = {last} AND {inc} > {last_inc}) OR {ts} > {last}) ORDER BY {ts}, {inc} ASC"
                ));
            }
            // Bulk; the timestamp modes always have a column (validated).
            _ => {}
        }
        if let Some(suffix) = &self.suffix {
            sql.push(' ');
            sql.push_str(suffix);
        }
        sql
    }
}

/// What the background reader sends.
pub enum Fetched {
    /// Before the first row: the result's columns and type names.
    Columns(Vec<(String, String)>),
    Row(Vec<Cell>),
    Failed(ConnectError),
}

/// Runs `sql` on a connection of its own and sends its rows, at most
/// `buffer` ahead of the reader; stops when the receiver is dropped.
pub fn spawn_reader(pool: &Pool, sql: String, buffer: usize) -> mpsc::Receiver<Fetched> {
    let (tx, rx) = mpsc::channel(buffer.max(1));
    let pool = pool.clone();
    tokio::spawn(async move {
        let context = || format!("running `{sql}`");
        let failed = |e: sqlx::Error| Fetched::Failed(classify(context(), e));
        macro_rules! read {
            ($pool:expr, $prelude:expr, $cells:ident) => {{
                let statement = format!("{}{sql}", $prelude);
                let mut rows = sqlx::raw_sql(&statement).fetch($pool);
                let mut first = true;
                while let Some(row) = rows.next().await {
                    let row = match row {
                        Ok(row) => row,
                        Err(e) => {
                            let _ = tx.send(failed(e)).await;
                            return;
                        }
                    };
                    if first {
                        first = false;
                        let columns = row
                            .columns()
                            .iter()
                            .map(|c| (c.name().to_string(), c.type_info().name().to_string()))
                            .collect();
                        if tx.send(Fetched::Columns(columns)).await.is_err() {
                            return;
                        }
                    }
                    let cells = match $cells(&row) {
                        Ok(cells) => cells,
                        Err(e) => {
                            let _ = tx.send(failed(e)).await;
                            return;
                        }
                    };
                    if tx.send(Fetched::Row(cells)).await.is_err() {
                        return;
                    }
                }
            }};
        }
        match &pool {
            // UTC for `timestamptz` text and for `now()`.
            Pool::Postgres(p, _) => read!(p, "SET TIME ZONE 'UTC'; ", pg_cells),
            Pool::MySql(p) => read!(p, "SET time_zone = '+00:00'; ", mysql_cells),
            Pool::Sqlite(p) => read!(p, "", sqlite_cells),
        }
    });
    rx
}

/// The simple query protocol returns every value as its text form.
fn pg_cells(row: &sqlx::postgres::PgRow) -> Result<Vec<Cell>, sqlx::Error> {
    (0..row.len())
        .map(|i| {
            let value = row.try_get_raw(i)?;
            if value.is_null() {
                return Ok(Cell::Null);
            }
            value
                .as_str()
                .map(|s| Cell::Text(s.to_string()))
                .map_err(sqlx::Error::Decode)
        })
        .collect()
}

fn mysql_cells(row: &sqlx::mysql::MySqlRow) -> Result<Vec<Cell>, sqlx::Error> {
    (0..row.len())
        .map(|i| {
            if row.try_get_raw(i)?.is_null() {
                return Ok(Cell::Null);
            }
            let bytes: Vec<u8> = row.try_get_unchecked(i)?;
            Ok(match String::from_utf8(bytes) {
                Ok(text) => Cell::Text(text),
                Err(e) => Cell::Bytes(e.into_bytes()),
            })
        })
        .collect()
}

/// SQLite's values by their storage class.
fn sqlite_cells(row: &sqlx::sqlite::SqliteRow) -> Result<Vec<Cell>, sqlx::Error> {
    (0..row.len())
        .map(|i| {
            let raw = row.try_get_raw(i)?;
            if raw.is_null() {
                return Ok(Cell::Null);
            }
            let value = sqlx::ValueRef::to_owned(&raw);
            Ok(match value.type_info().name() {
                "INTEGER" | "BOOLEAN" | "BIGINT" => Cell::Int(value.try_decode_unchecked()?),
                "REAL" => Cell::Float(value.try_decode_unchecked()?),
                "BLOB" => Cell::Bytes(value.try_decode_unchecked()?),
                _ => Cell::Text(value.try_decode_unchecked()?),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_follow_the_mode() {
        let stmt = |mode, dialect| Statement {
            dialect,
            mode,
            from: "SELECT * FROM \"t\"".into(),
            incrementing: Some("\"id\"".into()),
            timestamp: Some("\"ts\"".into()),
            suffix: None,
        };
        let at = Position {
            incrementing: Some(7),
            timestamp: chrono::DateTime::from_timestamp(1, 500_000_000).map(|d| d.naive_utc()),
        };
        let until = chrono::DateTime::from_timestamp(60, 0).map(|d| d.naive_utc());
        assert_eq!(
            stmt(Mode::Bulk, Dialect::Postgres).sql(at, until),
            "SELECT * FROM \"t\""
        );
        assert_eq!(
            stmt(Mode::Incrementing, Dialect::Postgres).sql(at, until),
            "SELECT * FROM \"t\" WHERE \"id\" > 7 ORDER BY \"id\" ASC"
        );
        assert_eq!(
            stmt(Mode::Timestamp, Dialect::Postgres).sql(at, until),
            "SELECT * FROM \"t\" WHERE \"ts\" > '1970-01-01 00:00:01.500000' AND \"ts\" < '1970-01-01 00:01:00.000000' ORDER BY \"ts\" ASC"
        );
        assert!(
            stmt(Mode::TimestampIncrementing, Dialect::Sqlite)
                .sql(at, until)
                .contains("(strftime('%Y-%m-%d %H:%M:%f', \"ts\") = '1970-01-01 00:00:01.500' AND \"id\" > 7)")
        );
    }

    #[test]
    fn offsets_are_confluents() {
        let at = Position {
            incrementing: Some(42),
            timestamp: chrono::DateTime::from_timestamp(1_700_000_000, 123_456_000)
                .map(|d| d.naive_utc()),
        };
        let offset = at.to_offset();
        assert_eq!(
            offset,
            serde_json::json!({"incrementing": 42, "timestamp": 1_700_000_000_123_i64, "timestamp_nanos": 123_456_000})
        );
        assert_eq!(Position::from_offset(&offset), at);
    }

    #[test]
    fn whitelist_entries_name_tables() {
        let t = TableId {
            catalog: Some("shop".into()),
            schema: Some("public".into()),
            table: "orders".into(),
        };
        assert_eq!(t.fqn(), "shop.public.orders");
        assert!(t.named_by("orders"));
        assert!(t.named_by("public.orders"));
        assert!(t.named_by("shop.public.orders"));
        assert!(!t.named_by("other.orders"));
    }
}
