//! Connections to the three databases, and running the dialect's SQL on
//! them: table introspection, batched writes, deletes, and the offsets
//! table. Every error keeps its sqlx cause; `classify` turns it into what
//! the runtime does (data, retriable, fatal).

use std::sync::Arc;
use std::time::Duration;

use sluice_sdk::{CommitOffset, ConfigError, ConnectError, ErrorKind as Kind};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPool, MySqlPoolOptions};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
};
use sqlx::{MySql, Postgres, Row as _, Sqlite, Transaction};

use crate::dialect::{Dialect, MYSQL_MAX_PARAMS, SQLITE_MAX_PARAMS, Shape, WriteMode};
use crate::native_pg::{NativeClient, NativePool, to_sqlx};
use crate::value::{ColumnKind, SqlValue};

/// Where `connection.url` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A file path (created if missing).
    Sqlite(String),
    /// A `postgres://` URL.
    Postgres(String),
    /// A `mysql://` URL (MySQL or MariaDB).
    MySql(String),
}

/// `postgres://user:secret@host/db` as `postgres://user:***@host/db`, for
/// messages.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        _ => url.to_string(),
    }
}

impl Target {
    pub fn dialect(&self) -> Dialect {
        match self {
            Target::Sqlite(_) => Dialect::Sqlite,
            Target::Postgres(_) => Dialect::Postgres,
            Target::MySql(_) => Dialect::MySql,
        }
    }

    pub fn parse(url: &str) -> Result<Target, ConfigError> {
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
        if let Some(tail) = rest
            .strip_prefix("mysql://")
            .or_else(|| rest.strip_prefix("mariadb://"))
        {
            return Ok(Target::MySql(format!("mysql://{tail}")));
        }
        Err(ConfigError::new(
            "connection.url",
            format!(
                "`{}` is not a supported database URL; expected jdbc:sqlite:PATH, jdbc:postgresql://HOST:PORT/DB, jdbc:mysql://HOST:PORT/DB (MySQL or MariaDB), or the same without `jdbc:`",
                redact_url(url)
            ),
        ))
    }
}

/// A connection pool to one of the databases (a handle: clones share it).
#[derive(Clone)]
pub enum Pool {
    Sqlite(SqlitePool),
    /// With the pipelining writer for transactions, where it connects as
    /// sqlx does (`native_pg`).
    Postgres(PgPool, Option<Arc<NativePool>>),
    MySql(MySqlPool),
}

/// An open transaction.
pub enum Tx {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>),
    PgNative(Box<NativeTx>),
    MySql(Transaction<'static, MySql>),
}

/// A transaction on the pipelining writer's connection. Dropped before
/// its commit or rollback, it closes the connection, which the server
/// rolls back.
pub struct NativeTx {
    client: Option<NativeClient>,
    pool: Arc<NativePool>,
}

impl NativeTx {
    async fn finish(mut self, sql: &str) -> Result<(), sqlx::Error> {
        let client = self.client.take().expect("open until finished");
        client.simple(sql).await.map_err(to_sqlx)?;
        self.pool.give_back(client);
        Ok(())
    }
}

/// A connection from the pool, outside any transaction.
pub enum PooledConn {
    Sqlite(PoolConnection<Sqlite>),
    Postgres(PoolConnection<Postgres>),
    MySql(PoolConnection<MySql>),
}

/// A connection to run statements on, in a transaction or not.
pub enum Conn<'a> {
    Sqlite(&'a mut SqliteConnection),
    Postgres(&'a mut PgConnection),
    PgNative(&'a mut NativeClient),
    MySql(&'a mut MySqlConnection),
}

/// A column as the database declares it.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub kind: ColumnKind,
    /// The declared type, used for explicit casts in PostgreSQL.
    pub sql_type: String,
}

impl Pool {
    /// `pipelined`: transactions on PostgreSQL go through the pipelining
    /// writer where it can connect as sqlx does.
    pub async fn connect(
        url: &str,
        user: Option<&str>,
        password: Option<&str>,
        size: u32,
        pipelined: bool,
    ) -> Result<Pool, ConnectError> {
        let target = Target::parse(url).map_err(|e| ConnectError::fatal(e.to_string()))?;
        let acquire = Duration::from_secs(10);
        let invalid = |what: &str, e: sqlx::Error| {
            ConnectError::fatal(format!("connection.url is not a valid {what} URL")).with_source(e)
        };
        Ok(match target {
            Target::Sqlite(path) => {
                let options = SqliteConnectOptions::new()
                    .filename(&path)
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .busy_timeout(Duration::from_secs(10));
                Pool::Sqlite(
                    SqlitePoolOptions::new()
                        .max_connections(size)
                        .acquire_timeout(acquire)
                        .connect_with(options)
                        .await
                        .map_err(|e| classify(format!("opening SQLite database {path}"), e))?,
                )
            }
            Target::Postgres(url) => {
                let mut options: PgConnectOptions =
                    url.parse().map_err(|e| invalid("PostgreSQL", e))?;
                if let Some(user) = user {
                    options = options.username(user);
                }
                if let Some(password) = password {
                    options = options.password(password);
                }
                // A sink's batches go through the pipelining writer; a
                // source's reads stay on sqlx.
                let native = pipelined.then(|| NativePool::configure(&url, &options, password));
                let pool = PgPoolOptions::new()
                    .max_connections(size)
                    .acquire_timeout(acquire)
                    .connect_with(options)
                    .await
                    .map_err(|e| classify("connecting to PostgreSQL".into(), e))?;
                let native = match native {
                    None => None,
                    Some(Ok(native)) => match native.take().await {
                        Ok(client) => {
                            native.give_back(client);
                            Some(Arc::new(native))
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "the pipelining PostgreSQL writer could not connect where sqlx did; each batch's statements are sent one after another's reply (slower)");
                            None
                        }
                    },
                    Some(Err(why)) => {
                        tracing::info!(reason = %why.0, "each batch's statements are sent one after another's reply: the pipelining PostgreSQL writer is not used");
                        None
                    }
                };
                Pool::Postgres(pool, native)
            }
            Target::MySql(url) => {
                let mut options: MySqlConnectOptions =
                    url.parse().map_err(|e| invalid("MySQL", e))?;
                if let Some(user) = user {
                    options = options.username(user);
                }
                if let Some(password) = password {
                    options = options.password(password);
                }
                Pool::MySql(
                    MySqlPoolOptions::new()
                        .max_connections(size)
                        .acquire_timeout(acquire)
                        .connect_with(options)
                        .await
                        .map_err(|e| classify("connecting to MySQL".into(), e))?,
                )
            }
        })
    }

    pub fn dialect(&self) -> Dialect {
        match self {
            Pool::Sqlite(_) => Dialect::Sqlite,
            Pool::Postgres(..) => Dialect::Postgres,
            Pool::MySql(_) => Dialect::MySql,
        }
    }

    /// Whether transactions go through the pipelining writer.
    pub fn pipelines(&self) -> bool {
        matches!(self, Pool::Postgres(_, Some(_)))
    }

    pub async fn begin(&self) -> Result<Tx, sqlx::Error> {
        Ok(match self {
            Pool::Sqlite(p) => Tx::Sqlite(p.begin().await?),
            Pool::Postgres(_, Some(native)) => {
                let client = native.take().await.map_err(to_sqlx)?;
                client.simple("BEGIN").await.map_err(to_sqlx)?;
                Tx::PgNative(Box::new(NativeTx {
                    client: Some(client),
                    pool: native.clone(),
                }))
            }
            Pool::Postgres(p, None) => Tx::Postgres(p.begin().await?),
            Pool::MySql(p) => Tx::MySql(p.begin().await?),
        })
    }

    pub async fn acquire(&self) -> Result<PooledConn, sqlx::Error> {
        Ok(match self {
            Pool::Sqlite(p) => PooledConn::Sqlite(p.acquire().await?),
            Pool::Postgres(p, _) => PooledConn::Postgres(p.acquire().await?),
            Pool::MySql(p) => PooledConn::MySql(p.acquire().await?),
        })
    }

    pub async fn close(&self) {
        match self {
            Pool::Sqlite(p) => p.close().await,
            Pool::Postgres(p, native) => {
                if let Some(native) = native {
                    native.close();
                }
                p.close().await
            }
            Pool::MySql(p) => p.close().await,
        }
    }
}

impl Tx {
    pub fn conn(&mut self) -> Conn<'_> {
        match self {
            Tx::Sqlite(t) => Conn::Sqlite(&mut *t),
            Tx::Postgres(t) => Conn::Postgres(&mut *t),
            Tx::PgNative(t) => Conn::PgNative(t.client.as_mut().expect("open until finished")),
            Tx::MySql(t) => Conn::MySql(&mut *t),
        }
    }

    pub async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Sqlite(t) => t.commit().await,
            Tx::Postgres(t) => t.commit().await,
            Tx::PgNative(t) => t.finish("COMMIT").await,
            Tx::MySql(t) => t.commit().await,
        }
    }

    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Sqlite(t) => t.rollback().await,
            Tx::Postgres(t) => t.rollback().await,
            Tx::PgNative(t) => t.finish("ROLLBACK").await,
            Tx::MySql(t) => t.rollback().await,
        }
    }
}

impl PooledConn {
    pub fn conn(&mut self) -> Conn<'_> {
        match self {
            PooledConn::Sqlite(c) => Conn::Sqlite(&mut *c),
            PooledConn::Postgres(c) => Conn::Postgres(&mut *c),
            PooledConn::MySql(c) => Conn::MySql(&mut *c),
        }
    }
}

/// Binds every value of `rows`, in order, to a SQLite or MySQL query (the
/// two have different query types, hence a macro).
macro_rules! bind_scalars {
    ($query:expr, $rows:expr) => {{
        let mut q = $query;
        for v in $rows {
            q = match v {
                SqlValue::Null => q.bind(None::<String>),
                SqlValue::Int(i) => q.bind(*i),
                SqlValue::Float(f) => q.bind(*f),
                SqlValue::Bool(b) => q.bind(*b),
                SqlValue::Text(s) | SqlValue::Decimal(s) => q.bind(s.as_str()),
                SqlValue::Bytes(b) => q.bind(b.as_slice()),
            };
        }
        q
    }};
}

/// A PostgreSQL array element type for a column kind.
fn pg_array_type(kind: ColumnKind) -> &'static str {
    match kind {
        ColumnKind::Int => "int8",
        ColumnKind::Float => "float8",
        // Bound as text and cast to the column's NUMERIC: exact.
        ColumnKind::Decimal => "text",
        ColumnKind::Bool => "bool",
        ColumnKind::Text => "text",
        ColumnKind::Bytes => "bytea",
    }
}

/// Binds one array per column (values are already coerced to the column's
/// kind, so each array has one element type).
fn bind_pg_columns<'q>(
    mut q: sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
    columns: &[Column],
    rows: &'q [Vec<SqlValue>],
) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
    for (c, column) in columns.iter().enumerate() {
        let cells = rows.iter().map(|r| &r[c]);
        q = match column.kind {
            ColumnKind::Int => q.bind(
                cells
                    .map(|v| match v {
                        SqlValue::Int(i) => Some(*i),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            ),
            ColumnKind::Float => q.bind(
                cells
                    .map(|v| match v {
                        SqlValue::Float(f) => Some(*f),
                        SqlValue::Int(i) => Some(*i as f64),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            ),
            ColumnKind::Bool => q.bind(
                cells
                    .map(|v| match v {
                        SqlValue::Bool(b) => Some(*b),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            ),
            ColumnKind::Text | ColumnKind::Decimal => q.bind(
                cells
                    .map(|v| match v {
                        SqlValue::Text(s) | SqlValue::Decimal(s) => Some(s.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            ),
            ColumnKind::Bytes => q.bind(
                cells
                    .map(|v| match v {
                        SqlValue::Bytes(b) => Some(b.as_slice()),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            ),
        };
    }
    q
}

impl Conn<'_> {
    pub fn dialect(&self) -> Dialect {
        match self {
            Conn::Sqlite(_) => Dialect::Sqlite,
            Conn::Postgres(_) | Conn::PgNative(_) => Dialect::Postgres,
            Conn::MySql(_) => Dialect::MySql,
        }
    }

    /// Runs a statement without parameters (DDL, savepoints).
    pub async fn execute(&mut self, sql: &str) -> Result<u64, sqlx::Error> {
        Ok(match self {
            Conn::Sqlite(c) => sqlx::query(sql).execute(&mut **c).await?.rows_affected(),
            Conn::Postgres(c) => sqlx::query(sql).execute(&mut **c).await?.rows_affected(),
            Conn::PgNative(c) => c.simple(sql).await.map_err(to_sqlx)?,
            Conn::MySql(c) => sqlx::query(sql).execute(&mut **c).await?.rows_affected(),
        })
    }

    /// The table's columns; empty if it does not exist.
    pub async fn describe(&mut self, table: &str) -> Result<Vec<Column>, sqlx::Error> {
        const PG_COLUMNS: &str = "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
                     FROM pg_attribute a \
                     WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped \
                     ORDER BY a.attnum";
        let rows: Vec<(String, String)> = match self {
            Conn::PgNative(c) => c
                .query_values(
                    PG_COLUMNS,
                    &[SqlValue::Text(Dialect::Postgres.quote_table(table))],
                )
                .await
                .map_err(to_sqlx)?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect::<Result<_, tokio_postgres::Error>>()
                .map_err(to_sqlx)?,
            Conn::Sqlite(c) => {
                sqlx::query_as("SELECT name, type FROM pragma_table_info(?1)")
                    .bind(table)
                    .fetch_all(&mut **c)
                    .await?
            }
            Conn::Postgres(c) => {
                sqlx::query_as(PG_COLUMNS)
                    .bind(Dialect::Postgres.quote_table(table))
                    .fetch_all(&mut **c)
                    .await?
            }
            Conn::MySql(c) => {
                let (schema, name) = match table.split_once('.') {
                    Some((s, n)) => (Some(s), n),
                    None => (None, table),
                };
                sqlx::query_as(
                    "SELECT CAST(column_name AS CHAR), CAST(column_type AS CHAR) \
                     FROM information_schema.columns \
                     WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? \
                     ORDER BY ordinal_position",
                )
                .bind(schema)
                .bind(name)
                .fetch_all(&mut **c)
                .await?
            }
        };
        Ok(rows
            .into_iter()
            .map(|(name, ty)| Column {
                kind: ColumnKind::from_declared(&ty),
                sql_type: ty,
                name,
            })
            .collect())
    }

    /// Writes `rows` (values in `shape.names` order, coerced to `columns`'
    /// kinds): one statement on PostgreSQL, `chunk` rows per statement
    /// elsewhere. Returns the rows affected.
    pub async fn write(
        &mut self,
        shape: &Shape<'_>,
        mode: WriteMode,
        columns: &[Column],
        rows: &[Vec<SqlValue>],
        chunk: usize,
    ) -> Result<u64, sqlx::Error> {
        if mode == WriteMode::Update && shape.names.len() == shape.pk.len() {
            // Nothing but the key: an update changes nothing.
            return Ok(0);
        }
        let width = shape.names.len().max(1);
        let mut affected = 0;
        match self {
            Conn::Postgres(c) => {
                let arrays: Vec<&str> = columns.iter().map(|c| pg_array_type(c.kind)).collect();
                let casts: Vec<&str> = columns.iter().map(|c| c.sql_type.as_str()).collect();
                let sql = Dialect::Postgres.unnest_write(shape, mode, &arrays, &casts);
                let q = bind_pg_columns(sqlx::query(&sql), columns, rows);
                affected += q.execute(&mut **c).await?.rows_affected();
            }
            Conn::PgNative(c) => {
                let arrays: Vec<&str> = columns.iter().map(|c| pg_array_type(c.kind)).collect();
                let casts: Vec<&str> = columns.iter().map(|c| c.sql_type.as_str()).collect();
                let sql = Dialect::Postgres.unnest_write(shape, mode, &arrays, &casts);
                affected += c
                    .write_columns(&sql, columns, rows)
                    .await
                    .map_err(to_sqlx)?;
            }
            Conn::Sqlite(c) => {
                for part in rows.chunks(chunk.min(SQLITE_MAX_PARAMS / width).max(1)) {
                    let sql = Dialect::Sqlite.values_write(shape, mode, part.len());
                    let q = bind_scalars!(sqlx::query::<Sqlite>(&sql), part.iter().flatten());
                    affected += q.execute(&mut **c).await?.rows_affected();
                }
            }
            Conn::MySql(c) => {
                for part in rows.chunks(chunk.min(MYSQL_MAX_PARAMS / width).max(1)) {
                    let sql = Dialect::MySql.values_write(shape, mode, part.len());
                    let q = bind_scalars!(sqlx::query::<MySql>(&sql), part.iter().flatten());
                    affected += q.execute(&mut **c).await?.rows_affected();
                }
            }
        }
        Ok(affected)
    }

    /// Deletes the rows whose keys (values in `pk` order) are given.
    pub async fn delete(
        &mut self,
        table: &str,
        pk: &[String],
        key_columns: &[Column],
        keys: &[Vec<SqlValue>],
        chunk: usize,
    ) -> Result<u64, sqlx::Error> {
        let width = pk.len().max(1);
        let mut affected = 0;
        match self {
            Conn::Postgres(c) => {
                let arrays: Vec<&str> = key_columns.iter().map(|c| pg_array_type(c.kind)).collect();
                let casts: Vec<&str> = key_columns.iter().map(|c| c.sql_type.as_str()).collect();
                let sql = Dialect::Postgres.delete(table, pk, keys.len(), &arrays, &casts);
                let q = bind_pg_columns(sqlx::query(&sql), key_columns, keys);
                affected += q.execute(&mut **c).await?.rows_affected();
            }
            Conn::PgNative(c) => {
                let arrays: Vec<&str> = key_columns.iter().map(|c| pg_array_type(c.kind)).collect();
                let casts: Vec<&str> = key_columns.iter().map(|c| c.sql_type.as_str()).collect();
                let sql = Dialect::Postgres.delete(table, pk, keys.len(), &arrays, &casts);
                affected += c
                    .write_columns(&sql, key_columns, keys)
                    .await
                    .map_err(to_sqlx)?;
            }
            Conn::Sqlite(c) => {
                for part in keys.chunks(chunk.min(SQLITE_MAX_PARAMS / width).max(1)) {
                    let sql = Dialect::Sqlite.delete(table, pk, part.len(), &[], &[]);
                    let q = bind_scalars!(sqlx::query::<Sqlite>(&sql), part.iter().flatten());
                    affected += q.execute(&mut **c).await?.rows_affected();
                }
            }
            Conn::MySql(c) => {
                for part in keys.chunks(chunk.min(MYSQL_MAX_PARAMS / width).max(1)) {
                    let sql = Dialect::MySql.delete(table, pk, part.len(), &[], &[]);
                    let q = bind_scalars!(sqlx::query::<MySql>(&sql), part.iter().flatten());
                    affected += q.execute(&mut **c).await?.rows_affected();
                }
            }
        }
        Ok(affected)
    }

    /// Upserts each `(topic, partition, next offset)` of `connector`.
    pub async fn store_offsets(
        &mut self,
        table: &str,
        connector: &str,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), sqlx::Error> {
        if offsets.is_empty() {
            return Ok(());
        }
        let sql = self.dialect().store_offsets(table, offsets.len());
        let values: Vec<SqlValue> = offsets
            .iter()
            .flat_map(|(t, p, o)| {
                [
                    SqlValue::Text(connector.to_string()),
                    SqlValue::Text(t.clone()),
                    SqlValue::Int((*p).into()),
                    SqlValue::Int(*o),
                ]
            })
            .collect();
        match self {
            Conn::Sqlite(c) => {
                bind_scalars!(sqlx::query::<Sqlite>(&sql), values.iter())
                    .execute(&mut **c)
                    .await?;
            }
            Conn::Postgres(c) => {
                // Four parameters per row is far under PostgreSQL's limit
                // for any realistic number of partitions in a batch.
                let mut q = sqlx::query::<Postgres>(&sql);
                for v in &values {
                    q = match v {
                        SqlValue::Int(i) => q.bind(*i),
                        SqlValue::Text(s) => q.bind(s.as_str()),
                        _ => unreachable!("offsets are text and integers"),
                    };
                }
                q.execute(&mut **c).await?;
            }
            Conn::PgNative(c) => {
                c.execute_values(&sql, &values).await.map_err(to_sqlx)?;
            }
            Conn::MySql(c) => {
                bind_scalars!(sqlx::query::<MySql>(&sql), values.iter())
                    .execute(&mut **c)
                    .await?;
            }
        }
        Ok(())
    }

    /// Exactly-once commit of offsets, as a compare-and-set: each
    /// partition's `next` is stored only if the stored offset is not past
    /// the batch's `first` and `next` moves it forward. Returns the first
    /// partition where it did not (another task committed there
    /// meanwhile, or a batch read backwards would move it back); the
    /// caller must then roll back, as what was stored before it stays in
    /// the transaction.
    pub async fn store_offsets_fenced(
        &mut self,
        table: &str,
        connector: &str,
        offsets: &[CommitOffset],
    ) -> Result<Option<(String, i32)>, sqlx::Error> {
        match self {
            Conn::Postgres(c) => {
                return store_offsets_fenced_pg(c, table, connector, offsets).await;
            }
            Conn::PgNative(c) => {
                return store_offsets_fenced_native(c, table, connector, offsets)
                    .await
                    .map_err(to_sqlx);
            }
            _ => {}
        }
        let dialect = self.dialect();
        let (advance, insert) = (dialect.advance_offset(table), dialect.insert_offset(table));
        for o in offsets {
            let text = |s: &str| SqlValue::Text(s.to_string());
            let (partition, topic) = (SqlValue::Int(o.partition.into()), text(&o.topic));
            let moved = self
                .execute_bound(
                    &advance,
                    &[
                        SqlValue::Int(o.next),
                        text(connector),
                        topic.clone(),
                        partition.clone(),
                        SqlValue::Int(o.first),
                        SqlValue::Int(o.next),
                    ],
                )
                .await?;
            if moved > 0 {
                continue;
            }
            // No row, or one past `first`: a row another task stored (or
            // is storing: the insert waits for its transaction) fails
            // the key.
            let values = [text(connector), topic, partition, SqlValue::Int(o.next)];
            match self.execute_bound(&insert, &values).await {
                Ok(_) => {}
                Err(e)
                    if e.as_database_error()
                        .is_some_and(|d| d.is_unique_violation()) =>
                {
                    return Ok(Some((o.topic.clone(), o.partition)));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Runs `sql` with `values` (integers and text) bound in order.
    async fn execute_bound(&mut self, sql: &str, values: &[SqlValue]) -> Result<u64, sqlx::Error> {
        Ok(match self {
            Conn::Sqlite(c) => bind_scalars!(sqlx::query::<Sqlite>(sql), values.iter())
                .execute(&mut **c)
                .await?
                .rows_affected(),
            Conn::Postgres(c) => {
                let mut q = sqlx::query::<Postgres>(sql);
                for v in values {
                    q = match v {
                        SqlValue::Int(i) => q.bind(*i),
                        SqlValue::Text(s) => q.bind(s.as_str()),
                        other => unreachable!("offsets are text and integers, not {other:?}"),
                    };
                }
                q.execute(&mut **c).await?.rows_affected()
            }
            Conn::PgNative(c) => c.execute_values(sql, values).await.map_err(to_sqlx)?,
            Conn::MySql(c) => bind_scalars!(sqlx::query::<MySql>(sql), values.iter())
                .execute(&mut **c)
                .await?
                .rows_affected(),
        })
    }

    /// Every `(topic, partition, next offset)` stored for `connector`.
    pub async fn load_offsets(
        &mut self,
        table: &str,
        connector: &str,
    ) -> Result<Vec<(String, i32, i64)>, sqlx::Error> {
        let sql = self.dialect().load_offsets(table);
        let rows = match self {
            Conn::Sqlite(c) => sqlx::query(&sql)
                .bind(connector)
                .fetch_all(&mut **c)
                .await?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get::<i64, _>(1)? as i32, r.try_get(2)?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()?,
            Conn::Postgres(c) => sqlx::query(&sql)
                .bind(connector)
                .fetch_all(&mut **c)
                .await?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()?,
            Conn::PgNative(c) => c
                .query_values(&sql, &[SqlValue::Text(connector.to_string())])
                .await
                .map_err(to_sqlx)?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                .collect::<Result<Vec<_>, tokio_postgres::Error>>()
                .map_err(to_sqlx)?,
            Conn::MySql(c) => sqlx::query(&sql)
                .bind(connector)
                .fetch_all(&mut **c)
                .await?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()?,
        };
        Ok(rows)
    }

    pub async fn delete_offset(
        &mut self,
        table: &str,
        connector: &str,
        topic: &str,
        partition: i32,
    ) -> Result<(), sqlx::Error> {
        let sql = self.dialect().delete_offset(table);
        match self {
            Conn::Sqlite(c) => {
                sqlx::query(&sql)
                    .bind(connector)
                    .bind(topic)
                    .bind(partition)
                    .execute(&mut **c)
                    .await?;
            }
            Conn::Postgres(c) => {
                sqlx::query(&sql)
                    .bind(connector)
                    .bind(topic)
                    .bind(partition)
                    .execute(&mut **c)
                    .await?;
            }
            Conn::PgNative(c) => {
                let values = [
                    SqlValue::Text(connector.to_string()),
                    SqlValue::Text(topic.to_string()),
                    SqlValue::Int(partition.into()),
                ];
                c.execute_values(&sql, &values).await.map_err(to_sqlx)?;
            }
            Conn::MySql(c) => {
                sqlx::query(&sql)
                    .bind(connector)
                    .bind(topic)
                    .bind(partition)
                    .execute(&mut **c)
                    .await?;
            }
        }
        Ok(())
    }
}

/// [`Conn::store_offsets_fenced`] on PostgreSQL: two statements for the
/// whole commit, not one or two per partition (a batch spans dozens of
/// partitions, and each statement is a round trip while the transaction
/// holds its locks).
async fn store_offsets_fenced_pg(
    c: &mut PgConnection,
    table: &str,
    connector: &str,
    offsets: &[CommitOffset],
) -> Result<Option<(String, i32)>, sqlx::Error> {
    if offsets.is_empty() {
        return Ok(None);
    }
    let topics: Vec<&str> = offsets.iter().map(|o| o.topic.as_str()).collect();
    let partitions: Vec<i32> = offsets.iter().map(|o| o.partition).collect();
    let firsts: Vec<i64> = offsets.iter().map(|o| o.first).collect();
    let nexts: Vec<i64> = offsets.iter().map(|o| o.next).collect();
    let moved: Vec<(String, i32)> = sqlx::query_as(&Dialect::Postgres.advance_offsets(table))
        .bind(connector)
        .bind(&topics)
        .bind(&partitions)
        .bind(&firsts)
        .bind(&nexts)
        .fetch_all(&mut *c)
        .await?;
    let unmoved = left_out(offsets, &moved);
    if unmoved.is_empty() {
        return Ok(None);
    }
    // No row, or one past `first` or ahead of `next`: the first offset of
    // a partition new to the connector goes in, any other is fenced.
    let inserted: Vec<(String, i32)> = sqlx::query_as(&Dialect::Postgres.insert_offsets(table))
        .bind(connector)
        .bind(unmoved.iter().map(|o| o.topic.as_str()).collect::<Vec<_>>())
        .bind(unmoved.iter().map(|o| o.partition).collect::<Vec<_>>())
        .bind(unmoved.iter().map(|o| o.next).collect::<Vec<_>>())
        .fetch_all(&mut *c)
        .await?;
    Ok(left_out(unmoved, &inserted)
        .first()
        .map(|o| (o.topic.clone(), o.partition)))
}

/// [`store_offsets_fenced_pg`] on the pipelining writer's connection.
async fn store_offsets_fenced_native(
    c: &mut NativeClient,
    table: &str,
    connector: &str,
    offsets: &[CommitOffset],
) -> Result<Option<(String, i32)>, tokio_postgres::Error> {
    if offsets.is_empty() {
        return Ok(None);
    }
    let returned = |rows: Vec<tokio_postgres::Row>| {
        rows.iter()
            .map(|r| Ok((r.try_get::<_, String>(0)?, r.try_get::<_, i32>(1)?)))
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()
    };
    let topics: Vec<&str> = offsets.iter().map(|o| o.topic.as_str()).collect();
    let partitions: Vec<i32> = offsets.iter().map(|o| o.partition).collect();
    let firsts: Vec<i64> = offsets.iter().map(|o| o.first).collect();
    let nexts: Vec<i64> = offsets.iter().map(|o| o.next).collect();
    let moved = returned(
        c.query(
            &Dialect::Postgres.advance_offsets(table),
            &[&connector, &topics, &partitions, &firsts, &nexts],
        )
        .await?,
    )?;
    let unmoved = left_out(offsets, &moved);
    if unmoved.is_empty() {
        return Ok(None);
    }
    let topics: Vec<&str> = unmoved.iter().map(|o| o.topic.as_str()).collect();
    let partitions: Vec<i32> = unmoved.iter().map(|o| o.partition).collect();
    let nexts: Vec<i64> = unmoved.iter().map(|o| o.next).collect();
    let inserted = returned(
        c.query(
            &Dialect::Postgres.insert_offsets(table),
            &[&connector, &topics, &partitions, &nexts],
        )
        .await?,
    )?;
    Ok(left_out(unmoved, &inserted)
        .first()
        .map(|o| (o.topic.clone(), o.partition)))
}

/// The offsets whose partition a statement's `RETURNING (topic,
/// partition)` did not name, in order.
fn left_out<'a>(
    offsets: impl IntoIterator<Item = &'a CommitOffset>,
    returned: &[(String, i32)],
) -> Vec<&'a CommitOffset> {
    offsets
        .into_iter()
        .filter(|o| {
            !returned
                .iter()
                .any(|(t, p)| *t == o.topic && *p == o.partition)
        })
        .collect()
}

/// What an error means for the sink: the record is at fault (data: the
/// runtime isolates it and dead-letters it or fails per
/// `errors.tolerance`), the database cannot take writes for now
/// (retriable, within the retry budget), or nothing can go on without
/// someone fixing the configuration, the permissions or a bug (fatal).
/// Decided per database below; docs/jdbc-errors.md gives the reason for
/// each code.
pub fn classify(context: String, e: sqlx::Error) -> ConnectError {
    let kind = match &e {
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
                mysql_kind(my.number(), &code, my.message())
            } else if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                sqlite_kind(code.parse().unwrap_or(1), db.message())
            } else {
                postgres_kind(&code, db.constraint())
            }
        }
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => Kind::Retriable,
        _ => Kind::Fatal,
    };
    let class = match (kind, &e) {
        (Kind::Data, sqlx::Error::Database(db))
            if db.code().is_some_and(|c| c.starts_with("22")) =>
        {
            "InvalidValue"
        }
        (Kind::Data, _) => "ConstraintViolation",
        (Kind::Retriable, _) => "DatabaseUnavailable",
        (Kind::Fatal, _) => "DatabaseError",
    };
    ConnectError::new(kind, context)
        .with_class(class)
        .with_source(e)
}

/// PostgreSQL, by SQLSTATE (appendix A of its manual): exact codes first,
/// then the class (the first two characters).
fn postgres_kind(code: &str, constraint: Option<&str>) -> Kind {
    match code {
        // Two tasks creating the same table at once (`CREATE TABLE IF NOT
        // EXISTS` is not atomic): the retry finds it created.
        "23505"
            if matches!(
                constraint,
                Some("pg_type_typname_nsp_index" | "pg_class_relname_nsp_index")
            ) =>
        {
            Kind::Retriable
        }
        "42P07" | "42710" => Kind::Retriable,
        // A table or column dropped since the sink read the table: the
        // retry reads it again, then creates or adds it, or says why not.
        "42P01" | "42703" => Kind::Retriable,
        // One upsert meets a key twice: keys that differ as the records
        // spell them are equal as the column's type (two spellings of one
        // instant); split, each is written.
        "21000" => Kind::Data,
        // The record gives a generated column a value.
        "428C9" => Kind::Data,
        // A field name no column can have: a system column's (`ctid`), or
        // one that, cut to 63 bytes, clashes with another.
        "42701" => Kind::Data,
        // A view's WITH CHECK OPTION, a trigger (RAISE EXCEPTION, ASSERT)
        // rejects the row.
        "44000" | "P0001" | "P0004" => Kind::Data,
        // Read-only (a standby: failover under way), a transaction that an
        // earlier error aborted (redone whole), idle-in-transaction
        // timeout, lock and statement timeouts, snapshot too old.
        "25006" | "25P02" | "25P03" | "55P03" | "55006" | "57014" | "72000" => Kind::Retriable,
        // The database was dropped: nothing to retry against.
        "57P04" => Kind::Fatal,
        // The server's own system or I/O errors (not a missing file).
        "58000" | "58030" => Kind::Retriable,
        _ => match code.get(..2).unwrap_or_default() {
            // Data exceptions, integrity constraints, and program limits
            // a record's value exceeds (index row size, columns, nesting).
            "22" | "23" | "54" => Kind::Data,
            // Connection, transaction rollback (serialization, deadlock),
            // insufficient resources, operator intervention (shutdown).
            "08" | "40" | "53" | "57" => Kind::Retriable,
            // Permissions, authentication, syntax, missing schemas or
            // databases, unsupported features, internal errors.
            _ => Kind::Fatal,
        },
    }
}

/// MySQL and MariaDB, by error number; SQLSTATE for the classes both use
/// consistently.
fn mysql_kind(number: u16, sqlstate: &str, message: &str) -> Kind {
    match number {
        // Duplicate key, NULL or no value for a NOT NULL column, foreign
        // key, check (4025 is MariaDB's check only with SQLSTATE 23000).
        1022 | 1062 | 1586 | 1859 | 1048 | 1364 | 1216 | 1217 | 1451 | 1452 | 1557 | 1761
        | 1762 | 3819 => Kind::Data,
        4025 if sqlstate == "23000" => Kind::Data,
        // Bad values: out of range, truncated, incorrect, too long,
        // invalid characters or JSON, division by zero.
        1264 | 1265 | 1292 | 1366 | 1367 | 1406 | 1411 | 1690 | 1365 | 1300 | 3140 => Kind::Data,
        // Limits and names a record's shape runs into: row too large, too
        // many columns (InnoDB on MariaDB: 1005 errno 185), a statement
        // over max_allowed_packet, an identifier over 64 characters, two
        // fields one column (names are case-insensitive), a column name
        // ending in a space.
        1118 | 1117 | 1153 | 1059 | 1060 | 1110 | 1166 => Kind::Data,
        1005 if message.contains("errno: 185") => Kind::Data,
        // A view's CHECK OPTION, a trigger's SIGNAL, a value for a
        // generated column.
        1369 | 1644 | 3105 | 1906 => Kind::Data,
        // Lock wait timeout, deadlock, a row changed since read (snapshot
        // isolation), a table changed under the statement, NOWAIT.
        1205 | 1213 | 1020 | 1412 | 1615 | 3572 | 1689 => Kind::Retriable,
        // Too many connections (server, user, resource limits), out of
        // memory or threads.
        1040 | 1203 | 1226 | 1037 | 1038 | 1041 | 1135 => Kind::Retriable,
        // Shutdown, a killed connection or query, statement timeouts,
        // network errors.
        1053
        | 1077
        | 1079
        | 1080
        | 1927
        | 1317
        | 1969
        | 3024
        | 1152
        | 1158..=1161
        | 1184
        | 2006
        | 2013 => Kind::Retriable,
        // Read-only: the server (--read-only: a failover under way),
        // InnoDB, the transaction.
        1290 | 1836 | 1874 | 1792 => Kind::Retriable,
        // The table or the disk is full; a Galera node not ready.
        1114 | 1021 | 1047 => Kind::Retriable,
        // A table or column dropped since the sink read the table.
        1146 | 1054 => Kind::Retriable,
        _ => match sqlstate.get(..2).unwrap_or_default() {
            "22" => Kind::Data,
            "08" | "40" => Kind::Retriable,
            // Access denied, unknown database, syntax, keys too long for
            // the configured key columns, ...
            _ => Kind::Fatal,
        },
    }
}

/// SQLite, by extended result code (its low byte is the primary code).
fn sqlite_kind(code: i32, message: &str) -> Kind {
    const IOERR_DATA: i32 = 10 | (32 << 8);
    const IOERR_CORRUPTFS: i32 = 10 | (33 << 8);
    match code & 0xff {
        // SQLITE_ERROR: by its message. A table or column dropped since
        // the sink read the table; more columns than SQLite allows (2000)
        // for the record's fields; else bad SQL.
        1 if ["no such table", "has no column named", "no such column"]
            .iter()
            .any(|m| message.contains(m)) =>
        {
            Kind::Retriable
        }
        1 if message.contains("too many columns") => Kind::Data,
        // Checksum mismatches: a corrupt file.
        10 if code == IOERR_DATA || code == IOERR_CORRUPTFS => Kind::Fatal,
        // ABORT (rolled back), BUSY, LOCKED, NOMEM, INTERRUPT, IOERR, FULL
        // (disk, or max_page_count), PROTOCOL (a WAL lock race), SCHEMA.
        4 | 5 | 6 | 7 | 9 | 10 | 13 | 15 | 17 => Kind::Retriable,
        // TOOBIG, CONSTRAINT and its extended codes (unique, primary key,
        // NOT NULL, check, foreign key, a trigger's RAISE, STRICT types),
        // MISMATCH (not an integer for an INTEGER PRIMARY KEY).
        18..=20 => Kind::Data,
        // PERM, READONLY, CORRUPT, CANTOPEN, MISUSE, NOLFS, AUTH, RANGE,
        // NOTADB, bad SQL: the file, its permissions, or a bug.
        _ => Kind::Fatal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            Target::parse("jdbc:sqlite:q.db").unwrap(),
            Target::Sqlite("q.db".into())
        );
        assert_eq!(
            Target::parse("sqlite:///tmp/q.db").unwrap(),
            Target::Sqlite("/tmp/q.db".into())
        );
        assert_eq!(
            Target::parse("jdbc:postgresql://db:5432/w").unwrap(),
            Target::Postgres("postgres://db:5432/w".into())
        );
        assert_eq!(
            Target::parse("jdbc:mariadb://db:3306/w").unwrap(),
            Target::MySql("mysql://db:3306/w".into())
        );
        let err = Target::parse("jdbc:oracle:thin:scott:tiger@x").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("connection.url"));
        let err = Target::parse("oracle://scott:tiger@x/db").unwrap_err();
        assert!(!err.to_string().contains("tiger"), "{err}");
    }

    /// Codes the integration tests cannot provoke (tests/jdbc.rs runs the
    /// rest on real databases); docs/jdbc-errors.md gives the reasons.
    #[test]
    fn codes_no_test_can_provoke() {
        use Kind::{Data, Fatal, Retriable};
        for (code, kind) in [
            ("40P01", Retriable),
            ("53100", Retriable),
            ("57P03", Retriable),
            ("58030", Retriable),
            ("57P04", Fatal),
            ("58P01", Fatal),
            ("XX001", Fatal),
            ("54023", Data),
        ] {
            assert_eq!(postgres_kind(code, None), kind, "PostgreSQL {code}");
        }
        for (number, sqlstate, kind) in [
            (1213, "40001", Retriable),
            (1040, "08004", Retriable),
            (1203, "42000", Retriable),
            (1053, "08S01", Retriable),
            (1836, "HY000", Retriable),
            (1021, "HY000", Retriable),
            (1047, "08S01", Retriable),
            (1153, "08S01", Data),
            (1117, "42000", Data),
            (3140, "22032", Data),
            (3105, "HY000", Data),
            (3819, "HY000", Data),
            // MySQL's 4025 is a DDL error, MariaDB's a CHECK.
            (4025, "HY000", Fatal),
            (4025, "23000", Data),
            (1044, "42000", Fatal),
            (1049, "42000", Fatal),
        ] {
            assert_eq!(mysql_kind(number, sqlstate, ""), kind, "MySQL {number}");
        }
        for (code, kind) in [
            (6, Retriable),          // LOCKED
            (262, Retriable),        // LOCKED_SHAREDCACHE
            (773, Retriable),        // BUSY_TIMEOUT
            (10, Retriable),         // IOERR
            (2314, Retriable),       // IOERR_RDLOCK (was read as SQLSTATE class 23)
            (3082, Retriable),       // IOERR_NOMEM
            (10 | (32 << 8), Fatal), // IOERR_DATA
            (11, Fatal),             // CORRUPT
            (22, Fatal),             // NOLFS (was read as SQLSTATE class 22)
            (23, Fatal),             // AUTH (was read as SQLSTATE class 23)
            (25, Fatal),             // RANGE
        ] {
            assert_eq!(sqlite_kind(code, ""), kind, "SQLite {code}");
        }
    }
}
