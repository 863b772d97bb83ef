//! The batch transaction on PostgreSQL through tokio-postgres, which can
//! send a statement before the reply to the one before it has been read.
//! sqlx, which the sink uses for everything else, cannot: each statement
//! waits for the last one's reply, and the backend idles while the task
//! binds the next. Here a batch's upsert goes in parts, each bound and sent
//! while the server runs the part before it (BENCHMARKS.md, "JDBC sink").
//!
//! The writer connects the way sqlx does for the same URL, or not at all:
//! a URL or an `sslmode` it cannot honour the same way (certificate
//! verification, client certificates, `allow`) leaves the batch on sqlx,
//! and the sink says so at start.

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgSslMode};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};
use tokio_rustls::rustls;

use crate::db::Column;
use crate::value::{ColumnKind, SqlValue};

/// Rows per statement when a write is split: each part is bound while the
/// part before it runs. 500-1000 did best in the bench's bare client.
pub const PART_ROWS: usize = 1000;

/// Prepared statements kept per connection (sqlx keeps 100).
const MAX_STATEMENTS: usize = 100;

/// Connections for batch transactions, kept between batches.
pub struct NativePool {
    config: tokio_postgres::Config,
    tls: MakeRustls,
    idle: Mutex<Vec<NativeClient>>,
}

/// One connection and the statements prepared on it.
pub struct NativeClient {
    client: Client,
    statements: HashMap<String, Statement>,
}

/// Why the batch transaction stays on sqlx for this URL.
#[derive(Debug)]
pub struct NotNative(pub String);

impl NativePool {
    /// The writer's settings for `url`, completed from what sqlx read for
    /// it (`PG*` variables included), or why it cannot connect as sqlx
    /// does.
    pub fn configure(
        url: &str,
        sqlx_options: &PgConnectOptions,
        password: Option<&str>,
    ) -> Result<NativePool, NotNative> {
        let mut config = tokio_postgres::Config::from_str(url)
            .map_err(|e| NotNative(format!("connection.url has options it does not take ({e})")))?;
        let ssl = match sqlx_options.get_ssl_mode() {
            PgSslMode::Disable => tokio_postgres::config::SslMode::Disable,
            PgSslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            PgSslMode::Require => tokio_postgres::config::SslMode::Require,
            other => {
                return Err(NotNative(format!(
                    "sslmode {other:?} is not one it supports (disable, prefer, require)"
                )));
            }
        };
        if ssl != tokio_postgres::config::SslMode::Disable
            && ["PGSSLCERT", "PGSSLKEY", "PGSSLROOTCERT"]
                .iter()
                .any(|v| std::env::var_os(v).is_some())
        {
            return Err(NotNative(
                "PGSSLCERT, PGSSLKEY or PGSSLROOTCERT is set, and it presents no client certificate"
                    .into(),
            ));
        }
        config.ssl_mode(ssl);
        if config.get_hosts().is_empty() {
            match sqlx_options.get_socket() {
                Some(dir) => config.host_path(dir),
                None => config.host(sqlx_options.get_host()),
            };
        }
        if config.get_ports().is_empty() {
            config.port(sqlx_options.get_port());
        }
        // What sqlx connects as: the URL's, `connection.user`, or `PGUSER`
        // and `PGDATABASE`.
        config.user(sqlx_options.get_username());
        if let Some(db) = sqlx_options.get_database() {
            config.dbname(db);
        }
        if config.get_application_name().is_none()
            && let Some(name) = sqlx_options.get_application_name()
        {
            config.application_name(name);
        }
        if config.get_options().is_none()
            && let Some(options) = sqlx_options.get_options()
        {
            config.options(options);
        }
        match password {
            Some(p) => {
                config.password(p);
            }
            None if config.get_password().is_none() => {
                if let Ok(p) = std::env::var("PGPASSWORD") {
                    config.password(p);
                }
            }
            None => {}
        }
        config.connect_timeout(Duration::from_secs(10));
        Ok(NativePool {
            config,
            tls: MakeRustls::new(),
            idle: Mutex::new(Vec::new()),
        })
    }

    /// An idle connection, or a new one.
    pub async fn take(&self) -> Result<NativeClient, tokio_postgres::Error> {
        let reused = {
            let mut idle = self.idle.lock().expect("not poisoned");
            std::iter::from_fn(|| idle.pop()).find(|c| !c.client.is_closed())
        };
        if let Some(client) = reused {
            return Ok(client);
        }
        let (client, connection) = self.config.connect(self.tls.clone()).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "jdbc sink: a PostgreSQL connection ended");
            }
        });
        Ok(NativeClient {
            client,
            statements: HashMap::new(),
        })
    }

    /// Keeps `client` for the next batch, unless its connection is gone.
    pub fn give_back(&self, client: NativeClient) {
        if !client.client.is_closed() {
            self.idle.lock().expect("not poisoned").push(client);
        }
    }

    /// Closes the idle connections.
    pub fn close(&self) {
        self.idle.lock().expect("not poisoned").clear();
    }
}

impl NativeClient {
    /// `sql` prepared on this connection (once: it is kept by its text).
    async fn prepared(&mut self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        if self.statements.len() >= MAX_STATEMENTS {
            // A sink routing to many tables: the server keeps each
            // prepared statement until it is closed (on drop).
            self.statements.clear();
        }
        let statement = self.client.prepare(sql).await?;
        self.statements.insert(sql.to_string(), statement.clone());
        Ok(statement)
    }

    /// Runs `sql` (no parameters) by the simple protocol: one round trip.
    /// Returns the rows the last command affected.
    pub async fn simple(&self, sql: &str) -> Result<u64, tokio_postgres::Error> {
        let messages = self.client.simple_query(sql).await?;
        Ok(messages
            .iter()
            .rev()
            .find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::CommandComplete(n) => Some(*n),
                _ => None,
            })
            .unwrap_or(0))
    }

    /// Runs a prepared `sql` with `params` and returns its rows.
    pub async fn query(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
        let statement = self.prepared(sql).await?;
        self.client.query(&statement, params).await
    }

    /// Runs a prepared `sql` with `params`; returns the rows affected.
    pub async fn execute(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, tokio_postgres::Error> {
        let statement = self.prepared(sql).await?;
        self.client.execute(&statement, params).await
    }

    /// Runs a prepared `sql` with `values` (integers and text), each
    /// integer bound as the integer type the server gave its parameter.
    pub async fn query_values(
        &mut self,
        sql: &str,
        values: &[SqlValue],
    ) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
        let statement = self.prepared(sql).await?;
        let bound = scalars(&statement, values);
        let params: Vec<&(dyn ToSql + Sync)> = bound
            .iter()
            .map(|b| b.as_ref() as &(dyn ToSql + Sync))
            .collect();
        self.client.query(&statement, &params).await
    }

    /// [`NativeClient::query_values`] for a statement that returns no
    /// rows; returns the rows affected.
    pub async fn execute_values(
        &mut self,
        sql: &str,
        values: &[SqlValue],
    ) -> Result<u64, tokio_postgres::Error> {
        let statement = self.prepared(sql).await?;
        let bound = scalars(&statement, values);
        let params: Vec<&(dyn ToSql + Sync)> = bound
            .iter()
            .map(|b| b.as_ref() as &(dyn ToSql + Sync))
            .collect();
        self.client.execute(&statement, &params).await
    }

    /// Runs `sql`, whose parameters are one array per column, over `rows`
    /// in parts of [`PART_ROWS`]: each part is bound and sent while the
    /// server runs the one before, so the backend does not wait for the
    /// client between parts. Parts run in order, in the caller's
    /// transaction; the first part to fail decides the error (the parts
    /// after it fail as the transaction is aborted). Returns the rows
    /// affected.
    pub async fn write_columns(
        &mut self,
        sql: &str,
        columns: &[Column],
        rows: &[Vec<SqlValue>],
    ) -> Result<u64, tokio_postgres::Error> {
        let statement = self.prepared(sql).await?;
        let parts = rows.len().div_ceil(PART_ROWS).max(1);
        let part_rows = rows.len().div_ceil(parts).max(1);
        let client = &self.client;
        let mut sent: Vec<Sent<'_>> = Vec::with_capacity(parts);
        for part in rows.chunks(part_rows) {
            let statement = &statement;
            sent.push(send(Box::pin(async move {
                let arrays = column_arrays(columns, part);
                let params: Vec<&(dyn ToSql + Sync)> =
                    arrays.iter().map(|a| a.as_param()).collect();
                client.execute(statement, &params).await
            })));
        }
        let mut affected = 0;
        let mut first_error = None;
        for statement in sent {
            match statement.await {
                Ok(n) => affected += n,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(affected),
        }
    }
}

/// Integers and text bound to `statement`'s parameters: an integer as the
/// parameter's integer type (an offsets table's `partition` is `INTEGER`),
/// so a value out of its range fails at the server's type, not silently.
fn scalars(statement: &Statement, values: &[SqlValue]) -> Vec<Box<dyn ToSql + Sync + Send>> {
    use tokio_postgres::types::Type;
    values
        .iter()
        .zip(statement.params())
        .map(|(v, ty)| -> Box<dyn ToSql + Sync + Send> {
            match v {
                SqlValue::Int(i) if *ty == Type::INT4 => match i32::try_from(*i) {
                    Ok(n) => Box::new(n),
                    Err(_) => Box::new(*i),
                },
                SqlValue::Int(i) if *ty == Type::INT2 => match i16::try_from(*i) {
                    Ok(n) => Box::new(n),
                    Err(_) => Box::new(*i),
                },
                SqlValue::Int(i) => Box::new(*i),
                SqlValue::Text(s) | SqlValue::Decimal(s) => Box::new(s.clone()),
                SqlValue::Float(f) => Box::new(*f),
                SqlValue::Bool(b) => Box::new(*b),
                SqlValue::Bytes(b) => Box::new(b.clone()),
                SqlValue::Null => Box::new(Null),
            }
        })
        .collect()
}

/// SQL NULL for a parameter of any type.
#[derive(Debug)]
struct Null;

impl ToSql for Null {
    fn to_sql(
        &self,
        _: &tokio_postgres::types::Type,
        _: &mut bytes::BytesMut,
    ) -> Result<tokio_postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        Ok(tokio_postgres::types::IsNull::Yes)
    }

    fn accepts(_: &tokio_postgres::types::Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

/// A statement sent, its reply not yet read.
type Sent<'a> = Pin<Box<dyn Future<Output = Result<u64, tokio_postgres::Error>> + Send + 'a>>;

/// Polls `statement` once, which binds and sends it, so the next part is
/// bound while the server runs this one. Its wake-up is not needed: the
/// caller awaits it later, which registers the task's waker.
fn send(mut statement: Sent<'_>) -> Sent<'_> {
    let mut context = Context::from_waker(Waker::noop());
    match statement.as_mut().poll(&mut context) {
        Poll::Ready(result) => Box::pin(std::future::ready(result)),
        Poll::Pending => statement,
    }
}

/// One column's values as a PostgreSQL array (values are already coerced
/// to the column's kind).
enum ColumnArray<'a> {
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Bool(Vec<Option<bool>>),
    Text(Vec<Option<&'a str>>),
    Bytes(Vec<Option<&'a [u8]>>),
}

impl ColumnArray<'_> {
    fn as_param(&self) -> &(dyn ToSql + Sync) {
        match self {
            ColumnArray::Int(v) => v,
            ColumnArray::Float(v) => v,
            ColumnArray::Bool(v) => v,
            ColumnArray::Text(v) => v,
            ColumnArray::Bytes(v) => v,
        }
    }
}

/// The arrays for `rows`, one per column, bound as the SQL of
/// `Dialect::unnest_write` declares them.
fn column_arrays<'a>(columns: &[Column], rows: &'a [Vec<SqlValue>]) -> Vec<ColumnArray<'a>> {
    columns
        .iter()
        .enumerate()
        .map(|(c, column)| {
            let cells = rows.iter().map(move |r| &r[c]);
            match column.kind {
                ColumnKind::Int => ColumnArray::Int(
                    cells
                        .map(|v| match v {
                            SqlValue::Int(i) => Some(*i),
                            _ => None,
                        })
                        .collect(),
                ),
                ColumnKind::Float => ColumnArray::Float(
                    cells
                        .map(|v| match v {
                            SqlValue::Float(f) => Some(*f),
                            SqlValue::Int(i) => Some(*i as f64),
                            _ => None,
                        })
                        .collect(),
                ),
                ColumnKind::Bool => ColumnArray::Bool(
                    cells
                        .map(|v| match v {
                            SqlValue::Bool(b) => Some(*b),
                            _ => None,
                        })
                        .collect(),
                ),
                ColumnKind::Text | ColumnKind::Decimal => ColumnArray::Text(
                    cells
                        .map(|v| match v {
                            SqlValue::Text(s) | SqlValue::Decimal(s) => Some(s.as_str()),
                            _ => None,
                        })
                        .collect(),
                ),
                ColumnKind::Bytes => ColumnArray::Bytes(
                    cells
                        .map(|v| match v {
                            SqlValue::Bytes(b) => Some(b.as_slice()),
                            _ => None,
                        })
                        .collect(),
                ),
            }
        })
        .collect()
}

/// A tokio-postgres error as the sqlx error `db::classify` reads: a
/// server's error keeps its SQLSTATE and constraint; a value the client
/// cannot convert is a decode error (fatal: a bug, no retry can fix it);
/// anything else (a lost connection, a failed handshake, an unexpected
/// message) is retriable, as the same failures are on sqlx.
pub fn to_sqlx(e: tokio_postgres::Error) -> sqlx::Error {
    if let Some(db) = e.as_db_error() {
        return sqlx::Error::Database(Box::new(ServerError {
            code: db.code().code().to_string(),
            message: db.message().to_string(),
            constraint: db.constraint().map(str::to_string),
        }));
    }
    // tokio-postgres keeps its error kinds private; these two are told
    // apart by how it prints them.
    let text = e.to_string();
    if text.starts_with("error serializing") || text.starts_with("error deserializing") {
        return sqlx::Error::Decode(Box::new(e));
    }
    if e.is_closed() || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>()) {
        sqlx::Error::Io(std::io::Error::other(e))
    } else {
        sqlx::Error::Protocol(format!("the PostgreSQL connection failed: {e}"))
    }
}

/// A PostgreSQL server error read by tokio-postgres.
#[derive(Debug)]
struct ServerError {
    code: String,
    message: String,
    constraint: Option<String>,
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The message alone, as sqlx prints a server's error: its DETAIL
        // may quote a row's values, which do not belong in logs.
        f.write_str(&self.message)
    }
}

impl std::error::Error for ServerError {}

impl sqlx::error::DatabaseError for ServerError {
    fn message(&self) -> &str {
        &self.message
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.code))
    }

    fn constraint(&self) -> Option<&str> {
        self.constraint.as_deref()
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> sqlx::error::ErrorKind {
        match self.code.as_str() {
            "23505" => sqlx::error::ErrorKind::UniqueViolation,
            "23503" => sqlx::error::ErrorKind::ForeignKeyViolation,
            "23502" => sqlx::error::ErrorKind::NotNullViolation,
            "23514" => sqlx::error::ErrorKind::CheckViolation,
            _ => sqlx::error::ErrorKind::Other,
        }
    }
}

/// TLS for `sslmode=prefer` and `require`, which (as in libpq and sqlx)
/// encrypt without verifying the server's certificate; `verify-ca` and
/// `verify-full` never reach here (they stay on sqlx).
#[derive(Clone)]
struct MakeRustls {
    config: Arc<rustls::ClientConfig>,
}

impl MakeRustls {
    fn new() -> MakeRustls {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = Arc::new(AnyCertificate(provider.clone()));
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports TLS 1.2 and 1.3")
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        MakeRustls {
            config: Arc::new(config),
        }
    }
}

impl<S> tokio_postgres::tls::MakeTlsConnect<S> for MakeRustls
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = rustls::pki_types::InvalidDnsNameError;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, Self::Error> {
        // A Unix socket's path, or an IP address, is no DNS name: SNI then
        // names nothing, which a certificate nobody verifies allows.
        let name = rustls::pki_types::ServerName::try_from(domain.to_string())
            .or_else(|_| rustls::pki_types::ServerName::try_from("localhost".to_string()))?;
        Ok(RustlsConnect {
            connector: tokio_rustls::TlsConnector::from(self.config.clone()),
            name,
        })
    }
}

struct RustlsConnect {
    connector: tokio_rustls::TlsConnector,
    name: rustls::pki_types::ServerName<'static>,
}

impl<S> tokio_postgres::tls::TlsConnect<S> for RustlsConnect
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let stream = self.connector.connect(self.name, stream).await?;
            Ok(RustlsStream(stream))
        })
    }
}

struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S> tokio_postgres::tls::TlsStream for RustlsStream<S>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    fn channel_binding(&self) -> tokio_postgres::tls::ChannelBinding {
        // No binding to a certificate nobody verified: SCRAM without
        // channel binding, as sqlx does.
        tokio_postgres::tls::ChannelBinding::none()
    }
}

impl<S> tokio::io::AsyncRead for RustlsStream<S>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S> tokio::io::AsyncWrite for RustlsStream<S>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Accepts the server's certificate unverified (`sslmode` prefer and
/// require), but still checks the handshake's signatures against it.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configured(url: &str, user: Option<&str>) -> Result<tokio_postgres::Config, NotNative> {
        let mut options: PgConnectOptions = url.parse().unwrap();
        if let Some(user) = user {
            options = options.username(user);
        }
        NativePool::configure(url, &options, Some("s3cret")).map(|p| p.config)
    }

    #[test]
    fn connects_as_sqlx_does() {
        let config = configured(
            "postgres://app@db.example:6543/orders?sslmode=require",
            None,
        )
        .unwrap();
        assert_eq!(config.get_user(), Some("app"));
        assert_eq!(config.get_dbname(), Some("orders"));
        assert_eq!(config.get_ports(), [6543]);
        assert_eq!(config.get_password(), Some(&b"s3cret"[..]));
        assert_eq!(
            config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
        // `connection.user` overrides the URL's user, as for sqlx.
        let config = configured("postgres://app@db.example/orders", Some("loader")).unwrap();
        assert_eq!(config.get_user(), Some("loader"));
    }

    #[test]
    fn leaves_on_sqlx_what_it_cannot_do_the_same_way() {
        for url in [
            "postgres://app@db/orders?sslmode=verify-full",
            "postgres://app@db/orders?sslmode=verify-ca",
            "postgres://app@db/orders?sslrootcert=/etc/ca.pem&sslmode=require",
        ] {
            let err = configured(url, None).unwrap_err();
            assert!(
                err.0.contains("connection.url has options"),
                "{url}: {}",
                err.0
            );
        }
    }
}
