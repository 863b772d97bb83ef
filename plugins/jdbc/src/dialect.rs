//! What differs between databases: URLs, identifier quoting, table
//! introspection and creation, the multi-row upsert, and error classes.

use sluice_sdk::{ConfigError, ConnectError};
use sqlx::{PgPool, Postgres, Sqlite, SqlitePool};

use crate::value::{ColumnKind, SqlValue};

/// Where `connection.url` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A file path (created if missing).
    Sqlite(String),
    /// A `postgres://` URL.
    Postgres(String),
}

pub enum Database {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// A column as the database declares it.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub kind: ColumnKind,
    /// The declared type, used for explicit casts in PostgreSQL.
    pub sql_type: String,
}

/// Binds every value of `rows`, in order, to a query of either database
/// (the two have different query types, hence a macro).
macro_rules! bind_values {
    ($query:expr, $rows:expr) => {{
        let mut q = $query;
        for v in $rows.iter().flatten() {
            q = match v {
                SqlValue::Null => q.bind(None::<String>),
                SqlValue::Int(i) => q.bind(*i),
                SqlValue::Float(f) => q.bind(*f),
                SqlValue::Bool(b) => q.bind(*b),
                SqlValue::Text(s) => q.bind(s.as_str()),
            };
        }
        q
    }};
}

/// Rows that write the same columns, in one or more SQL statements.
pub struct Statement {
    pub names: Vec<String>,
    pub columns: Vec<Column>,
    pub pk: Vec<String>,
    pub rows: Vec<Vec<SqlValue>>,
}

/// Most bind parameters per statement, under each database's limit.
const SQLITE_MAX_PARAMS: usize = 32_000;
const POSTGRES_MAX_PARAMS: usize = 65_000;

pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `schema.table` is quoted part by part; anything else as one identifier.
fn quote_table(name: &str) -> String {
    name.split('.')
        .map(quote_ident)
        .collect::<Vec<_>>()
        .join(".")
}

impl Database {
    pub fn from_url(url: &str) -> Result<Target, ConfigError> {
        let url = url.trim();
        let rest = url.strip_prefix("jdbc:").unwrap_or(url);
        if let Some(path) = rest
            .strip_prefix("sqlite://")
            .or_else(|| rest.strip_prefix("sqlite:"))
        {
            let path = path.split('?').next().unwrap_or(path);
            if path.is_empty() {
                return Err(ConfigError::new("connection.url", "names no SQLite file"));
            }
            return Ok(Target::Sqlite(path.to_string()));
        }
        if let Some(tail) = rest
            .strip_prefix("postgresql://")
            .or_else(|| rest.strip_prefix("postgres://"))
        {
            return Ok(Target::Postgres(format!("postgres://{tail}")));
        }
        Err(ConfigError::new(
            "connection.url",
            format!(
                "`{url}` is not a supported database URL; expected jdbc:sqlite:PATH, sqlite://PATH, jdbc:postgresql://HOST:PORT/DB or postgres://HOST:PORT/DB"
            ),
        ))
    }

    pub async fn describe_table(&self, table: &str) -> Result<Vec<Column>, ConnectError> {
        let ctx = || format!("reading the columns of table `{table}`");
        match self {
            Database::Sqlite(pool) => {
                let rows: Vec<(String, String)> =
                    sqlx::query_as("SELECT name, type FROM pragma_table_info(?1)")
                        .bind(table)
                        .fetch_all(pool)
                        .await
                        .map_err(|e| classify_sqlx_error(ctx(), e))?;
                Ok(rows
                    .into_iter()
                    .map(|(name, ty)| Column {
                        kind: ColumnKind::from_declared(&ty),
                        sql_type: ty,
                        name,
                    })
                    .collect())
            }
            Database::Postgres(pool) => {
                let rows: Vec<(String, String)> = sqlx::query_as(
                    "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
                     FROM pg_attribute a \
                     WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped \
                     ORDER BY a.attnum",
                )
                .bind(quote_table(table))
                .fetch_all(pool)
                .await
                .map_err(|e| classify_sqlx_error(ctx(), e))?;
                Ok(rows
                    .into_iter()
                    .map(|(name, ty)| Column {
                        kind: ColumnKind::from_declared(&ty),
                        sql_type: ty,
                        name,
                    })
                    .collect())
            }
        }
    }

    pub async fn create_table(
        &self,
        table: &str,
        columns: &[(String, ColumnKind)],
        pk: &[String],
    ) -> Result<(), ConnectError> {
        let type_name = |k: ColumnKind| match (self, k) {
            (Database::Sqlite(_), ColumnKind::Int) => "INTEGER",
            (Database::Sqlite(_), ColumnKind::Float) => "REAL",
            (Database::Postgres(_), ColumnKind::Int) => "BIGINT",
            (Database::Postgres(_), ColumnKind::Float) => "DOUBLE PRECISION",
            (_, ColumnKind::Bool) => "BOOLEAN",
            (_, ColumnKind::Text) => "TEXT",
        };
        let mut defs: Vec<String> = columns
            .iter()
            .map(|(name, kind)| {
                let not_null = if pk.contains(name) { " NOT NULL" } else { "" };
                format!("{} {}{not_null}", quote_ident(name), type_name(*kind))
            })
            .collect();
        if !pk.is_empty() {
            let pk: Vec<String> = pk.iter().map(|c| quote_ident(c)).collect();
            defs.push(format!("PRIMARY KEY ({})", pk.join(", ")));
        }
        let sql = format!(
            "CREATE TABLE IF NOT EXISTS {} ({})",
            quote_table(table),
            defs.join(", ")
        );
        let ctx = || format!("creating table `{table}`");
        match self {
            Database::Sqlite(pool) => sqlx::query(&sql).execute(pool).await.map(|_| ()),
            Database::Postgres(pool) => sqlx::query(&sql).execute(pool).await.map(|_| ()),
        }
        .map_err(|e| classify_sqlx_error(ctx(), e))
    }

    /// Writes every statement's rows in one transaction, at most `chunk`
    /// rows per SQL statement (and under the database's parameter limit).
    pub async fn write(
        &self,
        table: &str,
        statements: &[Statement],
        upsert: bool,
        chunk: usize,
    ) -> Result<(), ConnectError> {
        let total: usize = statements.iter().map(|s| s.rows.len()).sum();
        let ctx = || format!("writing {total} rows to table `{table}`");
        match self {
            Database::Sqlite(pool) => {
                let mut tx = pool
                    .begin()
                    .await
                    .map_err(|e| classify_sqlx_error(ctx(), e))?;
                for st in statements {
                    let per_stmt = chunk.min(SQLITE_MAX_PARAMS / st.names.len().max(1)).max(1);
                    for part in st.rows.chunks(per_stmt) {
                        let sql = insert_sql(table, &st.names, None, &st.pk, upsert, part.len());
                        let q = bind_values!(sqlx::query::<Sqlite>(&sql), part);
                        q.execute(&mut *tx)
                            .await
                            .map_err(|e| classify_sqlx_error(ctx(), e))?;
                    }
                }
                tx.commit().await.map_err(|e| classify_sqlx_error(ctx(), e))
            }
            Database::Postgres(pool) => {
                let mut tx = pool
                    .begin()
                    .await
                    .map_err(|e| classify_sqlx_error(ctx(), e))?;
                for st in statements {
                    let casts: Vec<&str> = st.columns.iter().map(|c| c.sql_type.as_str()).collect();
                    let per_stmt = chunk
                        .min(POSTGRES_MAX_PARAMS / st.names.len().max(1))
                        .max(1);
                    for part in st.rows.chunks(per_stmt) {
                        let sql =
                            insert_sql(table, &st.names, Some(&casts), &st.pk, upsert, part.len());
                        let q = bind_values!(sqlx::query::<Postgres>(&sql), part);
                        q.execute(&mut *tx)
                            .await
                            .map_err(|e| classify_sqlx_error(ctx(), e))?;
                    }
                }
                tx.commit().await.map_err(|e| classify_sqlx_error(ctx(), e))
            }
        }
    }

    pub async fn close(&self) {
        match self {
            Database::Sqlite(pool) => pool.close().await,
            Database::Postgres(pool) => pool.close().await,
        }
    }
}

/// `INSERT INTO t (a, b) VALUES (?, ?), ... [ON CONFLICT (pk) DO UPDATE ...]`.
/// With `casts` (PostgreSQL), each parameter is cast to its column's type so
/// text binds into timestamps, JSON and numerics alike.
fn insert_sql(
    table: &str,
    names: &[String],
    casts: Option<&[&str]>,
    pk: &[String],
    upsert: bool,
    rows: usize,
) -> String {
    let cols: Vec<String> = names.iter().map(|n| quote_ident(n)).collect();
    let mut sql = format!(
        "INSERT INTO {} ({}) VALUES ",
        quote_table(table),
        cols.join(", ")
    );
    let mut n = 0;
    for r in 0..rows {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for c in 0..names.len() {
            if c > 0 {
                sql.push_str(", ");
            }
            n += 1;
            match casts {
                Some(casts) => sql.push_str(&format!("${n}::{}", casts[c])),
                None => sql.push_str(&format!("?{n}")),
            }
        }
        sql.push(')');
    }
    if upsert && !pk.is_empty() {
        let target: Vec<String> = pk.iter().map(|c| quote_ident(c)).collect();
        let updates: Vec<String> = names
            .iter()
            .filter(|n| !pk.contains(n))
            .map(|n| format!("{0} = excluded.{0}", quote_ident(n)))
            .collect();
        if updates.is_empty() {
            sql.push_str(&format!(" ON CONFLICT ({}) DO NOTHING", target.join(", ")));
        } else {
            sql.push_str(&format!(
                " ON CONFLICT ({}) DO UPDATE SET {}",
                target.join(", "),
                updates.join(", ")
            ));
        }
    }
    sql
}

/// Constraint violations and bad values are data errors (this row is bad);
/// lost connections, timeouts and lock conflicts are retriable; the rest
/// (bad SQL, missing privileges, misconfiguration) is fatal.
pub fn classify_sqlx_error(context: String, e: sqlx::Error) -> ConnectError {
    use sqlx::error::ErrorKind as DbKind;
    let kind = match &e {
        sqlx::Error::Database(db) => {
            let code = db.code().map(|c| c.to_string()).unwrap_or_default();
            match db.kind() {
                DbKind::UniqueViolation
                | DbKind::ForeignKeyViolation
                | DbKind::NotNullViolation
                | DbKind::CheckViolation => sluice_sdk::ErrorKind::Data,
                _ if code.starts_with("22") || code.starts_with("23") => {
                    sluice_sdk::ErrorKind::Data
                }
                _ if code.starts_with("08")
                    || code.starts_with("53")
                    || code.starts_with("57P")
                    || code == "40001"
                    || code == "40P01" =>
                {
                    sluice_sdk::ErrorKind::Retriable
                }
                // SQLite: BUSY, LOCKED and their extended codes.
                _ if matches!(code.as_str(), "5" | "6" | "261" | "262" | "517") => {
                    sluice_sdk::ErrorKind::Retriable
                }
                // SQLite: constraint (19 and extended), mismatch (20), too big (18).
                _ if matches!(code.as_str(), "18" | "19" | "20")
                    || code.parse::<u32>().is_ok_and(|c| c & 0xff == 19) =>
                {
                    sluice_sdk::ErrorKind::Data
                }
                _ => sluice_sdk::ErrorKind::Fatal,
            }
        }
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => sluice_sdk::ErrorKind::Retriable,
        _ => sluice_sdk::ErrorKind::Fatal,
    };
    let class = match (kind, &e) {
        (sluice_sdk::ErrorKind::Data, sqlx::Error::Database(db))
            if db.code().is_some_and(|c| c.starts_with("22")) =>
        {
            "InvalidValue"
        }
        (sluice_sdk::ErrorKind::Data, _) => "ConstraintViolation",
        (sluice_sdk::ErrorKind::Retriable, _) => "DatabaseUnavailable",
        (sluice_sdk::ErrorKind::Fatal, _) => "DatabaseError",
    };
    ConnectError::new(kind, context)
        .with_class(class)
        .with_source(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            Database::from_url("jdbc:sqlite:q.db").unwrap(),
            Target::Sqlite("q.db".into())
        );
        assert_eq!(
            Database::from_url("sqlite:///tmp/q.db").unwrap(),
            Target::Sqlite("/tmp/q.db".into())
        );
        assert_eq!(
            Database::from_url("jdbc:postgresql://db:5432/w").unwrap(),
            Target::Postgres("postgres://db:5432/w".into())
        );
        let err = Database::from_url("jdbc:oracle:thin:@x").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("connection.url"));
    }

    #[test]
    fn upsert_sql_quotes_identifiers() {
        let names = vec!["id".to_string(), "Amount".to_string()];
        let sql = insert_sql("order", &names, None, &["id".into()], true, 2);
        assert_eq!(
            sql,
            "INSERT INTO \"order\" (\"id\", \"Amount\") VALUES (?1, ?2), (?3, ?4) \
             ON CONFLICT (\"id\") DO UPDATE SET \"Amount\" = excluded.\"Amount\""
        );
        let sql = insert_sql("s.t", &names, Some(&["bigint", "numeric"]), &[], false, 1);
        assert_eq!(
            sql,
            "INSERT INTO \"s\".\"t\" (\"id\", \"Amount\") VALUES ($1::bigint, $2::numeric)"
        );
    }
}
